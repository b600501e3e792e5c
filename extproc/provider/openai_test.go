package provider

import (
	"github.com/tollgate/tollgate/oaierror"

	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/config"
)

func TestOpenAIRequestTranslation(t *testing.T) {
	testRequests(t, config.TypeOpenAI, []requestCase{
		{"request_chat.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, "/v1/chat/completions", up.Path)
			assert.Contains(t, up.Headers, Header{"authorization", "Bearer sk-test-openai"})
		}},
	})
}

func TestOpenAIResponseTranslation(t *testing.T) {
	testResponses(t, config.TypeOpenAI, []answerCase{
		{fixture: "response_text.json", usage: Usage{PromptTokens: 19, CompletionTokens: 3, Reported: true},
			completion: "Hello there."},
		{fixture: "response_tool_calls.json", usage: Usage{PromptTokens: 82, CompletionTokens: 17, Reported: true},
			completion: "{\n\"location\": \"Boston, MA\"\n}"},
	})
}

func TestOpenAIStreamTranslation(t *testing.T) {
	testStreams(t, config.TypeOpenAI, []answerCase{
		{fixture: "stream_text.sse", usage: Usage{PromptTokens: 9, CompletionTokens: 2, Reported: true}, completion: "Héllo"},
		{fixture: "stream_tool_calls.sse", clientUsage: true, usage: Usage{PromptTokens: 50, CompletionTokens: 9, Reported: true},
			completion: `{"location":"Paris"}`},
	})
}

func TestOpenAIErrors(t *testing.T) {
	testErrors(t, config.TypeOpenAI, []errorCase{
		{"error_400.json", 400, 400, "model_not_found"},
		{"error_500.txt", 500, 503, oaierror.NoAvailableWorkers.Code},
	})
}
