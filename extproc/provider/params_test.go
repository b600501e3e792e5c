package provider

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
)

// TestNoParameterIsIgnored: every parameter a provider cannot honour is
// refused naming it; neutral values and what the provider translates pass;
// OpenAI-type and Azure deployments take every parameter.
func TestNoParameterIsIgnored(t *testing.T) {
	const msgs = `"model":"m","messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		typ, extra, refusedParam string
	}{
		{config.TypeAnthropic, `"n":2`, "n"},
		{config.TypeAnthropic, `"n":1`, ""},
		{config.TypeAnthropic, `"logprobs":true`, "logprobs"},
		{config.TypeAnthropic, `"logprobs":false`, ""},
		{config.TypeAnthropic, `"top_logprobs":3`, "top_logprobs"},
		{config.TypeAnthropic, `"seed":7`, "seed"},
		{config.TypeAnthropic, `"frequency_penalty":0.5`, "frequency_penalty"},
		{config.TypeAnthropic, `"logit_bias":{"50256":-100}`, "logit_bias"},
		{config.TypeAnthropic, `"seed":null`, ""},
		{config.TypeAnthropic, `"user":"u-1"`, ""},
		{config.TypeAnthropic, `"reasoning_effort":"low"`, "reasoning_effort"},
		{config.TypeGemini, `"n":3,"logprobs":true,"top_logprobs":5`, ""},
		{config.TypeGemini, `"logit_bias":{"50256":-100}`, "logit_bias"},
		{config.TypeGemini, `"seed":7`, ""},
		{config.TypeGemini, `"user":"u-1"`, "user"},
		{config.TypeGemini, `"parallel_tool_calls":false`, "parallel_tool_calls"},
		{config.TypeGemini, `"parallel_tool_calls":true`, ""},
		{config.TypeGemini, `"store":true`, "store"},
		{config.TypeOpenAI, `"n":2,"logprobs":true,"store":true,"reasoning_effort":"low"`, ""},
		{config.TypeAzure, `"n":2,"logit_bias":{"1":1}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.typ+" "+tt.extra, func(t *testing.T) {
			_, _, err := testAdapter(tt.typ).Translate(&Request{Body: []byte("{" + msgs + "," + tt.extra + "}")}, testTarget(tt.typ))
			if tt.refusedParam == "" {
				require.NoError(t, err)
				return
			}
			var pe *UnsupportedParameterError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, tt.refusedParam, pe.Param)
			assert.ErrorIs(t, err, ErrUnsupportedRequest)
			assert.Contains(t, err.Error(), tt.refusedParam)
		})
	}
}

func TestEveryParameterHasARowForEveryProvider(t *testing.T) {
	for _, p := range Parameters {
		for _, typ := range ProviderTypes {
			assert.NotEmpty(t, p.By[typ].How, "%s on %s", p.Name, typ)
		}
	}
}
