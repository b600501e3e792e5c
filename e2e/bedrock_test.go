package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/money"
)

// bedrockAPIKey is the Bedrock API key the mock takes as a bearer token.
const bedrockAPIKey = "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxl"

// bedrockKeys are the AWS keys the Bedrock mock verifies signatures with.
var bedrockKeys = &mockllm.AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Region: "us-east-1"}

// TestABedrockModelAnswersSignedAndIsBilledExactly: a chat through a
// Bedrock deployment reaches the mock signed with SigV4 over the exact
// bytes and headers that arrive (the mock recomputes the signature with
// AWS's signer), whole and streamed (AWS's event stream), and is billed
// the provider's counts exactly — cache reads and writes at their prices.
// A Bedrock API key goes as a bearer token instead. A deployment signing
// with a wrong secret key fails loudly: the client
// gets an error, nothing is billed.
func TestABedrockModelAnswersSignedAndIsBilledExactly(t *testing.T) {
	t.Parallel()
	mock := startMock(t, "bedrock", mockllm.Options{AWS: bedrockKeys, Credentials: map[mockllm.Format]string{mockllm.Bedrock: "Bearer " + bedrockAPIKey},
		Answer: mockText, Usage: &mockllm.Usage{Prompt: 30, Completion: 7},
		// The model "anthropic.failing" is down: Bedrock's 503.
		Fault: func(r *mockllm.Request) mockllm.Fault {
			if strings.Contains(r.Path, "anthropic.failing") {
				return mockllm.Fault{Status: http.StatusServiceUnavailable}
			}
			return mockllm.Fault{}
		}}, nil)
	after := newMockOpenAI(t)
	tg := startTollgate(t, fmt.Sprintf(`key_prefix: tg
providers:
  - {name: bedrock, type: bedrock, base_url: "%[1]s", region: us-east-1, access_key_id: %[2]s, secret_access_key: "%[3]s"}
  - {name: bedrock-wrong, type: bedrock, base_url: "%[1]s", region: us-east-1, access_key_id: %[2]s, secret_access_key: "not-the-secret-key"}
  - {name: bedrock-key, type: bedrock, base_url: "%[1]s", region: us-east-1, api_key: "%[4]s"}
  - {name: openai-after, type: openai, base_url: "%[5]s/v1", api_key: sk-openai-secret}
models:
  - {id: claude-bedrock, max_tokens: 8192, input_price_per_million: 0.15, cached_input_price_per_million: 0.015,
     cache_write_price_per_million: 0.30, output_price_per_million: 0.60,
     deployments: [{provider: bedrock, model: "anthropic.claude-3-5-sonnet-20240620-v1:0"}]}
  - {id: claude-wrong-key, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: bedrock-wrong, model: "anthropic.claude-3-5-sonnet-20240620-v1:0"}]}
  - {id: nova-by-key, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: bedrock-key, model: "amazon.nova-lite-v1:0"}]}
  - {id: bedrock-then-openai, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: bedrock, model: "anthropic.failing-v1:0", priority: 0}, {provider: openai-after, model: gpt-4o-mini, priority: 1}]}
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`, mock.URL, bedrockKeys.AccessKeyID, bedrockKeys.SecretAccessKey, bedrockAPIKey, after.URL), "")

	const email = "bedrock@example.com"
	secret := tg.newAccount(t, email, "10")
	keyID := tg.onlyKeyID(t, email)
	client := tg.client(secret)
	// 30 prompt tokens: 21 input, 6 read from the cache, 3 written to it.
	const cost = money.Nanos(21*150 + 6*15 + 3*300 + 7*600)
	want := usageRecord{Model: "claude-bedrock", Provider: "bedrock", PromptTokens: 30, Completion: 7, Cost: cost, Status: 200}

	resp, err := client.Chat.Completions.New(context.Background(), paramsFor("claude-bedrock"))
	require.NoError(t, err)
	require.Len(t, resp.Choices, 1)
	assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
	assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
	assert.EqualValues(t, 30, resp.Usage.PromptTokens)
	assert.EqualValues(t, 6, resp.Usage.PromptTokensDetails.CachedTokens)
	assert.EqualValues(t, 7, resp.Usage.CompletionTokens)
	assert.Equal(t, []usageRecord{want}, tg.waitRecords(t, keyID, 1))

	got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor("claude-bedrock")))
	assert.Equal(t, mockFullText(), got.text, "the streamed text is the same")
	assert.Equal(t, "stop", got.finish)
	assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2))
	assert.Equal(t, 10*money.PerDollar-2*cost, tg.balance(t, email), "the balance fell by exactly the cost")
	assert.Empty(t, mock.issues(), "signed as AWS checks it, on Bedrock's paths")
	reqs := mock.received()
	require.Len(t, reqs, 2)
	assert.Equal(t, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse", reqs[0].Path)
	assert.Equal(t, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream", reqs[1].Path)

	// A Bedrock API key instead of a signature: a bearer token.
	byKey := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor("nova-by-key")))
	assert.Equal(t, mockFullText(), byKey.text)
	keyed := mock.received()[2]
	assert.Equal(t, "Bearer "+bedrockAPIKey, keyed.Header.Get("Authorization"))
	assert.Empty(t, keyed.Header.Get("X-Amz-Date"), "nothing signed")
	assert.Empty(t, mock.issues())
	assert.Equal(t, usageRecord{Model: "nova-by-key", Provider: "bedrock-key", PromptTokens: 30, Completion: 7,
		Cost: money.Nanos(30*150 + 7*600), Status: 200}, tg.waitRecords(t, keyID, 3)[2], "no cache prices: every prompt token at the input price")
	billed := 10*money.PerDollar - 2*cost - money.Nanos(30*150+7*600)
	assert.Equal(t, billed, tg.balance(t, email))

	// The Messages API (Claude Code), whose metadata.user_id Bedrock has
	// no place for.
	// Its cache marks become Bedrock's cache points.
	messages := `{"model":"claude-bedrock","max_tokens":200,"metadata":{"user_id":"user_abc"},` +
		`"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	st, answer, _ := postMessages(t, tg, secret, "/messages", messages)
	require.Equal(t, http.StatusOK, st, answer)
	assert.Equal(t, mockFullText(), gjson.Get(answer, "content.0.text").String(), answer)
	st, stream, _ := postMessages(t, tg, secret, "/messages", strings.Replace(messages, "{", `{"stream":true,`, 1))
	require.Equal(t, http.StatusOK, st, stream)
	assert.Equal(t, "message_stop", sseNames(stream)[len(sseNames(stream))-1], stream)
	for _, r := range tg.waitRecords(t, keyID, 5)[3:] {
		assert.Equal(t, want, r, "billed as the chat was")
	}
	for _, r := range mock.received()[3:5] {
		b, err := json.Marshal(r.Body)
		require.NoError(t, err)
		assert.JSONEq(t, `[{"text":"Be brief."},{"cachePoint":{"type":"default"}}]`, gjson.GetBytes(b, "system").Raw, "the system prompt is cached")
	}
	billed -= 2 * cost
	assert.Equal(t, billed, tg.balance(t, email))

	t.Run("tool calls and the Responses API", func(t *testing.T) {
		const email = "bedrock-tools@example.com"
		secret := tg.newAccount(t, email, "10")
		keyID := tg.onlyKeyID(t, email)
		client := tg.client(secret)
		got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), toolParamsFor("claude-bedrock")))
		assert.Equal(t, "tool_calls", got.finish)
		require.Len(t, got.toolCalls, len(mockToolCalls))
		for i, call := range mockToolCalls {
			assert.Equal(t, mockllm.ToolCallID(mockllm.Bedrock, i), got.toolCalls[i].id)
			assert.Equal(t, call.name, got.toolCalls[i].name)
			assert.JSONEq(t, call.arguments(), got.toolCalls[i].arguments)
		}
		r, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
			Model: "claude-bedrock", Instructions: openai.String("Be brief."),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
		})
		require.NoError(t, err)
		assert.Equal(t, mockFullText(), r.OutputText())
		assert.EqualValues(t, 30, r.Usage.InputTokens)
		assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2))
		assert.Empty(t, mock.issues())
	})

	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("wrong secret key, stream=%t", stream), func(t *testing.T) {
			var err error
			if stream {
				s := client.Chat.Completions.NewStreaming(context.Background(), paramsFor("claude-wrong-key"))
				for s.Next() {
				}
				err = s.Err()
			} else {
				_, err = client.Chat.Completions.New(context.Background(), paramsFor("claude-wrong-key"))
			}
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusInternalServerError, apiErr.StatusCode)
			assert.Contains(t, apiErr.Message, "refused Tollgate's credentials")
			assert.NotContains(t, apiErr.RawJSON(), "not-the-secret-key")
		})
	}
	assert.NotEmpty(t, mock.Problems(), "the mock refused the wrong signatures")
	for _, r := range tg.usageRecords(t, keyID)[5:] {
		assert.NotEqual(t, 200, r.Status)
		assert.Zero(t, r.Cost, "a refused request is not billed")
	}
	assert.Equal(t, billed, tg.balance(t, email), "nothing more was billed")

	// Attempts share the request's headers (Envoy's upstream filters edit
	// one map): what the Bedrock attempt set — its event-stream accept, its
	// signature — must not follow the retry to an OpenAI-type provider.
	t.Run("failover from Bedrock to an OpenAI-type provider", func(t *testing.T) {
		const email = "bedrock-failover@example.com"
		secret := tg.newAccount(t, email, "10")
		keyID := tg.onlyKeyID(t, email)
		got := readStream(t, tg.client(secret).Chat.Completions.NewStreaming(context.Background(), paramsFor("bedrock-then-openai")))
		assert.Equal(t, strings.Join(mockWords, ""), got.text, "the OpenAI-type deployment answers")
		recs := tg.waitRecords(t, keyID, 1)
		assert.Equal(t, "openai-after", recs[0].Provider, "recorded on the deployment that answered")
		assert.Equal(t, 200, recs[0].Status)
		var failed int
		for _, r := range mock.received() {
			if strings.Contains(r.Path, "anthropic.failing") {
				failed++
				assert.Equal(t, "application/vnd.amazon.eventstream", r.Header.Get("Accept"), "the Bedrock attempt asked for AWS's event stream")
			}
		}
		assert.Equal(t, 1, failed, "Bedrock was tried first")
		reqs := after.received()
		require.Len(t, reqs, 1)
		for _, name := range []string{"X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token"} {
			assert.Empty(t, reqs[0].Header.Get(name), name)
		}
		assert.NotContains(t, reqs[0].Header.Get("Accept"), "eventstream", "no Bedrock accept on the OpenAI attempt")
		assert.Equal(t, "Bearer sk-openai-secret", reqs[0].Header.Get("Authorization"), "its own credential, not Bedrock's signature")
	})
}
