package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAVertexProviderTakesAProjectAndARegionAndNoAPIKey: type vertex
// derives its base_url from its region (the global endpoint for global),
// takes location as region's other name, keeps a base_url given, and
// refuses what it cannot use, by field.
func TestAVertexProviderTakesAProjectAndARegionAndNoAPIKey(t *testing.T) {
	const models = "models: [{id: g, max_tokens: 10, deployments: [{provider: v, model: gemini-2.5-flash}]}]\nplans: [{name: free, models: [\"*\"]}]\n"
	parse := func(provider string) (*Provider, error) {
		c, err := Parse([]byte("providers: ["+provider+"]\n"+models), env(nil))
		if err != nil {
			return nil, err
		}
		p, _ := c.Provider("v")
		return p, nil
	}
	tests := []struct {
		name, provider, baseURL, region, err string
	}{
		{"a region", "{name: v, type: vertex, project: p1, region: us-central1, credentials_file: /etc/sa.json}",
			"https://us-central1-aiplatform.googleapis.com", "us-central1", ""},
		{"global", "{name: v, type: vertex, project: p1, region: global}", "https://aiplatform.googleapis.com", "global", ""},
		{"location for region", "{name: v, type: vertex, project: p1, location: europe-west4}",
			"https://europe-west4-aiplatform.googleapis.com", "europe-west4", ""},
		{"a base_url given", "{name: v, type: vertex, project: p1, region: us-east5, base_url: \"http://127.0.0.1:9/\"}",
			"http://127.0.0.1:9", "us-east5", ""},
		{"no project", "{name: v, type: vertex, region: us-east5}", "", "", "providers[0] (v).project"},
		{"no region", "{name: v, type: vertex, project: p1}", "", "", "providers[0] (v).region"},
		{"two regions", "{name: v, type: vertex, project: p1, region: us-east5, location: global}", "", "", "providers[0] (v).location"},
		{"a region that is no name", "{name: v, type: vertex, project: p1, region: \"us/../x\"}", "", "", "providers[0] (v).region"},
		{"an api_key", "{name: v, type: vertex, project: p1, region: global, api_key: k}", "", "", "providers[0] (v).api_key"},
		{"vertex fields elsewhere", "{name: v, type: gemini, base_url: \"http://x\", api_key: k, project: p1}", "", "", "providers[0] (v).project"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := parse(tt.provider)
			if tt.err != "" {
				assert.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.baseURL, p.BaseURL)
			assert.Equal(t, tt.region, p.Region)
			assert.Equal(t, tt.region, p.Location)
		})
	}
}
