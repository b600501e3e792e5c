package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestADemoProviderNeedsNoBaseURLOrKeyAndTakesNone: type demo is answered
// by Tollgate itself, at DemoBaseURL; a base_url or an api_key given to it
// is a mistake, refused by name.
func TestADemoProviderNeedsNoBaseURLOrKeyAndTakesNone(t *testing.T) {
	const models = "models: [{id: demo, max_tokens: 10, deployments: [{provider: d, model: demo}]}]\nplans: [{name: free, models: [\"*\"]}]\n"
	c, err := Parse([]byte("providers: [{name: d, type: demo}]\n"+models), env(nil))
	require.NoError(t, err)
	p, _ := c.Provider("d")
	assert.Equal(t, DemoBaseURL, p.BaseURL)
	assert.Equal(t, DefaultImageTokens[TypeOpenAI], c.Models[0].ImageTokens, "counted as an OpenAI-type provider")

	_, err = Parse([]byte("providers: [{name: d, type: demo, base_url: \"http://x/v1\"}]\n"+models), env(nil))
	assert.ErrorContains(t, err, "providers[0] (d).base_url")
	_, err = Parse([]byte("providers: [{name: d, type: demo, api_key: k}]\n"+models), env(nil))
	assert.ErrorContains(t, err, "providers[0] (d).api_key")
	_, err = Parse([]byte("providers: [{name: d, type: demo, responses_api: true}]\n"+models), env(nil))
	assert.ErrorContains(t, err, "responses_api", "served by translation")
}
