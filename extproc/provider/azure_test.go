package provider

import (
	"github.com/tollgate/tollgate/oaierror"

	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

func TestAzureRequestTranslation(t *testing.T) {
	testRequests(t, config.TypeAzure, []requestCase{
		{"request_limits.json", func(t *testing.T, up Upstream) {
			assert.EqualValues(t, 300, gjson.GetBytes(up.Body, "max_tokens").Int(), "the smaller limit, the one held")
			assert.False(t, gjson.GetBytes(up.Body, "max_completion_tokens").Exists(), "one limit only")
		}},
		{"request_chat.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, "/openai/deployments/gpt-4o%20prod/chat/completions?api-version=2024-10-21", up.Path)
			assert.Equal(t, "contoso.openai.azure.com", up.Authority)
			assert.Contains(t, up.Headers, Header{"api-key", "az-test-key"})
			for _, h := range up.Headers {
				assert.NotEqual(t, "authorization", h.Name, "Azure takes its key in api-key only")
			}
			assert.True(t, gjson.GetBytes(up.Body, "stream_options.include_usage").Bool())
		}},
	})
}

func TestAzureResponseTranslation(t *testing.T) {
	testResponses(t, config.TypeAzure, []answerCase{
		// Azure omits refusal and logprobs; they are added as null.
		{fixture: "response_text.json", usage: Usage{PromptTokens: 18, CompletionTokens: 9, Reported: true},
			completion: "Hello! How can I help you today?"},
		{fixture: "response_tool_calls.json", usage: Usage{PromptTokens: 80, CompletionTokens: 15, Reported: true},
			completion: `{"city":"Paris"}`},
	})
}

func TestAzureStreamTranslation(t *testing.T) {
	testStreams(t, config.TypeAzure, []answerCase{
		// The prompt_filter_results chunk and the asynchronous filter
		// annotation are dropped, and so is the usage chunk the client did
		// not ask for.
		{fixture: "stream_text.sse", usage: Usage{PromptTokens: 18, CompletionTokens: 6, Reported: true},
			completion: "Hello — héllo!"},
		{fixture: "stream_tool_calls.sse", clientUsage: true, usage: Usage{PromptTokens: 70, CompletionTokens: 12, Reported: true},
			completion: `{"city":"Paris"}`},
	})
}

func TestAzureErrors(t *testing.T) {
	testErrors(t, config.TypeAzure, []errorCase{
		// Azure's error has "type": null and an extra status field.
		{"error_400_content_filter.json", 400, 400, "content_filter"},
		{"error_404.json", 404, 400, "DeploymentNotFound"},
		{"error_429.json", 429, 503, oaierror.NoAvailableWorkers.Code},
	})
}

func FuzzAzureStream(f *testing.F) {
	fuzzStream(f, config.TypeAzure)
}

func TestAzureOddStreams(t *testing.T) { testOddStreams(t, config.TypeAzure, openAIOddStreams()) }
