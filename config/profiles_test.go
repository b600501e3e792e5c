package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestAProfileNameAsTypeIsAnOpenAIProviderWithItsDefaults: "type: mistral"
// is an openai-type provider with profile mistral, Mistral's base URL and
// no stream_options; a base_url or stream_usage written in the file wins.
func TestAProfileNameAsTypeIsAnOpenAIProviderWithItsDefaults(t *testing.T) {
	text := strings.Replace(valid, "  - name: az\n", `  - name: mistral
    type: mistral
    api_key: k
  - name: local
    type: ollama
    base_url: http://gpu-box:11434/v1
    stream_usage: false
  - name: custom
    type: openai
    base_url: http://strict.internal/v1
    stream_usage: false
  - name: az
`, 1)
	c, err := Parse([]byte(text), env(map[string]string{"OPENAI_API_KEY": "k"}))
	require.NoError(t, err)

	m, ok := c.Provider("mistral")
	require.True(t, ok)
	assert.Equal(t, TypeOpenAI, m.Type)
	assert.Equal(t, "mistral", m.Profile)
	assert.Equal(t, "https://api.mistral.ai/v1", m.BaseURL)
	assert.False(t, m.SendsStreamUsage())
	assert.Equal(t, "max_tokens", m.ProfileOf().LimitField)

	local, _ := c.Provider("local")
	assert.Equal(t, "http://gpu-box:11434/v1", local.BaseURL)
	assert.False(t, local.SendsStreamUsage(), "the file's stream_usage wins over the profile's")

	custom, _ := c.Provider("custom")
	assert.Nil(t, custom.ProfileOf())
	assert.False(t, custom.SendsStreamUsage())

	plain, _ := c.Provider("openai")
	assert.True(t, plain.SendsStreamUsage(), "type openai asks for usage unless told not to")
	assert.Nil(t, plain.ProfileOf())
}

// TestEveryProfileParsesWithItsDocumentedBaseURL: each profile alone is a
// valid provider (its default base URL passes validation).
func TestEveryProfileParsesWithItsDocumentedBaseURL(t *testing.T) {
	for _, prof := range Profiles {
		text := strings.Replace(valid, "type: azure\n    base_url: https://res.openai.azure.com\n", "type: "+prof.Name+"\n", 1)
		c, err := Parse([]byte(text), env(map[string]string{"OPENAI_API_KEY": "k"}))
		require.NoError(t, err, prof.Name)
		p, _ := c.Provider("az")
		assert.Equal(t, prof.BaseURL, p.BaseURL, prof.Name)
		assert.Equal(t, prof.StreamOptions, p.SendsStreamUsage(), prof.Name)
	}
}

func TestBadProfilesNameTheField(t *testing.T) {
	for _, tc := range []struct{ name, edit, want string }{
		{"unknown profile", "type: openai\n    profile: nope", "providers[1] (az).profile"},
		{"profile off openai", "type: anthropic\n    profile: groq", "openai-type providers only"},
		{"type and profile differ", "type: groq\n    profile: mistral", "providers[1] (az).profile"},
		{"stream usage off openai", "type: azure\n    stream_usage: false", "providers[1] (az).stream_usage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(valid, "type: azure", tc.edit, 1)
			_, err := Parse([]byte(text), env(map[string]string{"OPENAI_API_KEY": "k"}))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}
