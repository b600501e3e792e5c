package oaierror

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEveryErrorHasAnAnthropicTypeByItsStatus(t *testing.T) {
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{MissingAPIKey, AnthropicAuthentication},
		{KeyExpired, AnthropicAuthentication},
		{IPNotAllowed, AnthropicPermission},
		{ModelNotAllowed, AnthropicPermission},
		{RateLimited, AnthropicRateLimit},
		{BudgetExceeded, AnthropicRateLimit},
		{InsufficientBalance, AnthropicBilling},
		{BodyTooLarge, AnthropicRequestTooLarge},
		{NoAvailableWorkers, AnthropicOverloaded},
		{Overloaded, AnthropicOverloaded},
		{UpstreamFailed, AnthropicAPI},
		{Internal, AnthropicAPI},
		{NotFound, AnthropicNotFound},
		{MethodNotAllowed, AnthropicInvalidRequest},
		{ContextLengthExceeded, AnthropicInvalidRequest},
		{Invalid("invalid_temperature", "temperature", "x"), AnthropicInvalidRequest},
	} {
		t.Run(tt.e.Code, func(t *testing.T) {
			var got AnthropicEnvelope
			require.NoError(t, json.Unmarshal(tt.e.AnthropicBody(), &got))
			assert.Equal(t, "error", got.Type)
			assert.Equal(t, tt.want, got.Error.Type)
			assert.Contains(t, got.Error.Message, tt.e.Message)
			assert.Contains(t, got.Error.Message, tt.e.Code, "Tollgate's code stays readable")
		})
	}
}

func TestTheMessagesAPIsPathsGetAnthropicsShape(t *testing.T) {
	for path, want := range map[string]Shape{
		"/v1/messages":                  ShapeAnthropic,
		"/v1/messages?beta=true":        ShapeAnthropic,
		"/v1/messages/count_tokens":     ShapeAnthropic,
		"/v1/messagesx":                 ShapeOpenAI,
		"/v1/chat/completions":          ShapeOpenAI,
		"/v1/models":                    ShapeOpenAI,
		"/v1/responses":                 ShapeOpenAI,
		"/api/v1/keys":                  ShapeOpenAI,
		"/v1/messages/count_tokens?x=1": ShapeAnthropic,
		"":                              ShapeOpenAI,
	} {
		assert.Equal(t, want, ShapeOf(path), path)
	}
	assert.JSONEq(t, string(RateLimited.Body()), string(RateLimited.BodyFor(ShapeOpenAI)))
	assert.JSONEq(t, string(RateLimited.AnthropicBody()), string(RateLimited.BodyFor(ShapeAnthropic)))
}
