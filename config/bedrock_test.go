package config

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func bedrockConfig(provider string) string {
	return `
providers:
  - name: aws
    type: bedrock
` + provider + `
models:
  - id: claude
    max_tokens: 4096
    input_price_per_million: 3
    output_price_per_million: 15
    deployments:
      - provider: aws
        model: anthropic.claude-3-5-sonnet-20240620-v1:0
plans:
  - name: pro
    models: ["*"]
`
}

func TestABedrockProviderGetsItsRegionsURLAndKeepsItsKeysSecret(t *testing.T) {
	c, err := Parse([]byte(bedrockConfig("    region: eu-west-3\n    access_key_id: ${AWS_KEY}\n    secret_access_key: ${AWS_SECRET}\n")),
		env(map[string]string{"AWS_KEY": "AKIDEXAMPLE", "AWS_SECRET": "wJalrXUtnFEMI/K7MDENG"}))
	require.NoError(t, err)
	p, _ := c.Provider("aws")
	assert.Equal(t, "https://bedrock-runtime.eu-west-3.amazonaws.com", p.BaseURL)
	assert.Equal(t, "wJalrXUtnFEMI/K7MDENG", p.SecretAccessKey.Reveal())
	assert.NotContains(t, fmt.Sprintf("%v %+v %#v", *p, *p, *p), "wJalrXUtnFEMI")
	assert.NotContains(t, fmt.Sprintf("%v", *p), "AKIDEXAMPLE")

	c, err = Parse([]byte(bedrockConfig("    region: us-east-1\n    base_url: http://127.0.0.1:9/\n")), nil)
	require.NoError(t, err, "no keys: the default credential chain")
	p, _ = c.Provider("aws")
	assert.Equal(t, "http://127.0.0.1:9", p.BaseURL)
}

func TestBadBedrockProvidersNameTheField(t *testing.T) {
	tests := []struct{ provider, field string }{
		{"", "providers[0] (aws).region"},
		{"    region: US East\n", "providers[0] (aws).region"},
		{"    region: us-east-1\n    access_key_id: AKID\n", "providers[0] (aws).secret_access_key"},
		{"    region: us-east-1\n    api_key: k\n    access_key_id: AKID\n    secret_access_key: s\n", "providers[0] (aws).api_key"},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(bedrockConfig(tt.provider)), nil)
		require.Error(t, err, tt.provider)
		assert.Contains(t, err.Error(), tt.field, tt.provider)
	}
	_, err := Parse([]byte(`
providers:
  - name: o
    type: openai
    base_url: https://api.openai.com/v1
    region: us-east-1
`), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "providers[0] (o).region")
}
