package schematest

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The check must be able to fail: each of these is something OpenAI's API
// would never send, and the schema must say so.
func TestSchemaRejectsWhatOpenAIWouldNotSend(t *testing.T) {
	schemas, err := Schemas()
	require.NoError(t, err)
	tests := []struct{ name, component, body string }{
		{"completion without refusal", Completion, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"logprobs":null,"finish_reason":"stop"}]}`},
		{"completion without logprobs", Completion, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"finish_reason":"stop"}]}`},
		{"unknown finish reason", Chunk, `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"end_turn"}]}`},
		{"chunk without object", Chunk, `{"id":"","object":"","created":0,"model":"","choices":[]}`},
		{"tool call without arguments", Completion, `{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f"}}]},"logprobs":null,"finish_reason":"tool_calls"}]}`},
		{"error without param", Error, `{"error":{"message":"m","type":"t","code":"c"}}`},
		{"chunk with Anthropic's finish reason", Chunk, `{"id":"x","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"end_turn"}]}`},
		{"model list without object", ModelList, `{"data":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v any
			require.NoError(t, json.Unmarshal([]byte(tt.body), &v))
			assert.Error(t, schemas[tt.component].VisitJSON(v))
		})
	}
}

func TestSchemaAcceptsAnOpenAICompletion(t *testing.T) {
	Require(t, Completion, []byte(`{"id":"x","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi","refusal":null},"logprobs":null,"finish_reason":"stop"}]}`))
}

// The schema is the repository's own, so a clone anywhere runs these tests
// (they fail, never skip, without it).
func TestTheSchemaIsTheRepositorysOwn(t *testing.T) {
	t.Setenv(specEnv, "")
	path, err := specPath()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join("testdata", "openai-openapi.yaml"), filepath.Join(filepath.Base(filepath.Dir(path)), filepath.Base(path)))
	_, err = os.Stat(path)
	require.NoError(t, err)
}
