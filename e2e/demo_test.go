package e2e

import (
	"context"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// demoConfig serves model "demo" from the built-in demo provider only.
const demoConfig = `key_prefix: tg
providers:
  - {name: demo, type: demo}
models:
  - id: demo
    max_tokens: 4096
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments: [{provider: demo, model: demo}]
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`

// TestTheDemoProviderAnswersThroughTheWholePath: a demo deployment goes
// through the same adapter path as a real provider — a whole answer
// metered from its reported usage, a stream of tool calls, and the
// Responses API by translation — with nothing but tollgate serve running.
func TestTheDemoProviderAnswersThroughTheWholePath(t *testing.T) {
	tg := startTollgate(t, demoConfig, "")
	secret := tg.newAccount(t, "demo@example.com", "10")
	keyID := tg.onlyKeyID(t, "demo@example.com")
	client := tg.client(secret)
	ctx := context.Background()

	resp, err := client.Chat.Completions.New(ctx, paramsFor("demo"))
	require.NoError(t, err)
	assert.Equal(t, `You said: "Say hello.". This is Tollgate's demo model: it answers offline, the same way every time.`,
		resp.Choices[0].Message.Content)
	r := tg.waitRecords(t, keyID, 1)[0]
	assert.Equal(t, "demo", r.Provider)
	assert.False(t, r.Estimated)
	assert.Equal(t, resp.Usage.PromptTokens, r.PromptTokens)
	assert.Equal(t, resp.Usage.CompletionTokens, r.Completion)
	assert.Positive(t, r.Completion)
	assert.Equal(t, costOf(r.PromptTokens, r.Completion), r.Cost)

	got := readStream(t, client.Chat.Completions.NewStreaming(ctx, toolParamsFor("demo")))
	assert.Equal(t, "tool_calls", got.finish)
	require.Len(t, got.toolCalls, 2)
	assert.Equal(t, "get_weather", got.toolCalls[0].name)
	assert.JSONEq(t, `{"city":"Paris"}`, got.toolCalls[0].arguments)
	assert.Equal(t, "get_time", got.toolCalls[1].name)

	answer, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}})
	require.NoError(t, err)
	assert.Contains(t, answer.OutputText(), `You said: "Weather in Paris?"`)
	assert.Positive(t, answer.Usage.InputTokens)
	tg.waitRecords(t, keyID, 3)
}

// TestTheBuiltInEdgeAnswersTheDemoInProcess: as `make run` starts it (no
// gRPC listener for Envoy), tollgate serve opens no socket for the demo
// provider; the built-in edge calls it in process, whichever binding ties
// the edge to ext_proc.
func TestTheBuiltInEdgeAnswersTheDemoInProcess(t *testing.T) {
	for _, b := range []string{"in-process", "grpc"} {
		t.Run(b, func(t *testing.T) {
			tg := serve(t, demoConfig, "", "--edge", b, "--grpc-listen", "")
			secret := tg.newAccount(t, "demo@example.com", "10")
			resp, err := tg.client(secret).Chat.Completions.New(context.Background(), paramsFor("demo"))
			require.NoError(t, err)
			assert.Contains(t, resp.Choices[0].Message.Content, "Tollgate's demo model")
		})
	}
}
