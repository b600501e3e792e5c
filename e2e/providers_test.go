package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/money"
)

func paramsFor(model string) openai.ChatCompletionNewParams {
	p := chatParams()
	p.Model = model
	return p
}

func toolParamsFor(model string) openai.ChatCompletionNewParams {
	p := paramsFor(model)
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather and time in Paris?")}
	p.Tools = []openai.ChatCompletionToolUnionParam{
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{
			Name:        "get_weather",
			Description: openai.String("Current weather of a city."),
			Parameters: openai.FunctionParameters{
				"type":       "object",
				"properties": map[string]any{"city": map[string]any{"type": "string"}},
				"required":   []string{"city"},
			},
		}),
		openai.ChatCompletionFunctionTool(openai.FunctionDefinitionParam{Name: "get_time"}),
	}
	return p
}

// streamed is what a client assembles from a stream.
type streamed struct {
	text      string
	finish    string
	toolCalls []toolCall
	chunks    int
}

type toolCall struct{ id, typ, name, arguments string }

// readStream drains an SDK stream, putting tool calls together from their
// fragments by index, and checks the SDK's own accumulator agrees.
func readStream(t *testing.T, stream interface {
	Next() bool
	Current() openai.ChatCompletionChunk
	Err() error
}) streamed {
	t.Helper()
	var out streamed
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		chunk := stream.Current()
		require.True(t, acc.AddChunk(chunk), "the SDK accumulator takes chunk %d: %s", out.chunks, chunk.RawJSON())
		out.chunks++
		assert.Equal(t, "chat.completion.chunk", string(chunk.Object))
		require.NotEmpty(t, chunk.Choices, "a chunk without choices reached the client: %s", chunk.RawJSON())
		c := chunk.Choices[0]
		out.text += c.Delta.Content
		if c.FinishReason != "" {
			out.finish = string(c.FinishReason)
		}
		for _, tc := range c.Delta.ToolCalls {
			for int(tc.Index) >= len(out.toolCalls) {
				out.toolCalls = append(out.toolCalls, toolCall{})
			}
			call := &out.toolCalls[tc.Index]
			if tc.ID != "" {
				require.Empty(t, call.id, "tool call %d gets its id once", tc.Index)
				call.id, call.typ, call.name = tc.ID, tc.Type, tc.Function.Name
			}
			call.arguments += tc.Function.Arguments
		}
	}
	require.NoError(t, stream.Err())
	if len(out.toolCalls) > 0 {
		require.Len(t, acc.Choices, 1)
		var fromSDK []toolCall
		for _, tc := range acc.Choices[0].Message.ToolCalls {
			fromSDK = append(fromSDK, toolCall{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments})
		}
		assert.Equal(t, out.toolCalls, fromSDK, "the SDK's accumulator assembles the same tool calls")
	}
	return out
}

func TestEveryProviderGivesTheSDKTheSameAnswerStreamedOrNot(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			mock := mocks[k.kind]
			email := k.kind + "-text@example.com"
			secret := tg.newAccount(t, email, "10")
			keyID := tg.onlyKeyID(t, email)
			client := tg.client(secret)
			prompt, completion := mockUsage[k.kind][0], mockUsage[k.kind][1]
			cost := costOf(prompt, completion)
			wantRecord := usageRecord{Model: k.model, Provider: k.kind, PromptTokens: prompt, Completion: completion, Cost: cost, Status: 200}

			resp, err := client.Chat.Completions.New(context.Background(), paramsFor(k.model))
			require.NoError(t, err)
			require.Len(t, resp.Choices, 1)
			assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
			assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
			assert.Equal(t, "assistant", string(resp.Choices[0].Message.Role))
			assert.Equal(t, prompt, resp.Usage.PromptTokens, "the provider's prompt tokens")
			assert.Equal(t, completion, resp.Usage.CompletionTokens, "the provider's completion tokens")
			assert.Equal(t, []usageRecord{wantRecord}, tg.waitRecords(t, keyID, 1))
			assert.Equal(t, 10*money.PerDollar-cost, tg.balance(t, email), "the balance fell by exactly the cost")

			got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor(k.model)))
			assert.Equal(t, mockFullText(), got.text, "the streamed text is the same")
			assert.Equal(t, "stop", got.finish, "the streamed finish_reason is the same")
			assert.Equal(t, []usageRecord{wantRecord, wantRecord}, tg.waitRecords(t, keyID, 2))
			assert.Equal(t, 10*money.PerDollar-2*cost, tg.balance(t, email))
			u := tg.keyUsage(t, keyID)
			assert.Equal(t, int64(2), u.TotalRequests)
			assert.Equal(t, 2*cost, u.TotalCostUSD)

			assert.Empty(t, mock.issues(), "credential, path and headers as the provider wants them")
			reqs := mock.received()
			require.Len(t, reqs, 2)
			assert.Nil(t, reqs[0].Body["stream"], "not streamed: no stream flag")
			if k.kind != "gemini" { // Gemini streams by its path, not a flag
				assert.Equal(t, true, reqs[1].Body["stream"])
			}
		})
	}
}

func TestEveryProviderReturnsToolCallsStreamedOrNot(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			email := k.kind + "-tools@example.com"
			secret := tg.newAccount(t, email, "10")
			keyID := tg.onlyKeyID(t, email)
			client := tg.client(secret)
			ids := mockToolIDs[k.kind]
			checkCalls := func(t *testing.T, got []toolCall) {
				t.Helper()
				require.Len(t, got, len(mockToolCalls))
				for i, want := range mockToolCalls {
					assert.Equal(t, ids[i], got[i].id, "tool call %d id", i)
					assert.Equal(t, "function", got[i].typ)
					assert.Equal(t, want.name, got[i].name)
					assert.JSONEq(t, want.arguments(), got[i].arguments, "tool call %d arguments", i)
				}
			}

			resp, err := client.Chat.Completions.New(context.Background(), toolParamsFor(k.model))
			require.NoError(t, err)
			require.Len(t, resp.Choices, 1)
			assert.Equal(t, "tool_calls", string(resp.Choices[0].FinishReason))
			var calls []toolCall
			for _, tc := range resp.Choices[0].Message.ToolCalls {
				calls = append(calls, toolCall{tc.ID, tc.Type, tc.Function.Name, tc.Function.Arguments})
			}
			checkCalls(t, calls)

			got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), toolParamsFor(k.model)))
			assert.Equal(t, "tool_calls", got.finish)
			checkCalls(t, got.toolCalls)

			prompt, completion := mockUsage[k.kind][0], mockUsage[k.kind][1]
			for _, r := range tg.waitRecords(t, keyID, 2) {
				assert.Equal(t, usageRecord{Model: k.model, Provider: k.kind, PromptTokens: prompt, Completion: completion,
					Cost: costOf(prompt, completion), Status: 200}, r)
			}
			assert.Equal(t, 10*money.PerDollar-2*costOf(prompt, completion), tg.balance(t, email))

			reqs := mocks[k.kind].received()
			require.Len(t, reqs, 2)
			for _, r := range reqs {
				assert.NotNil(t, r.Body["tools"], "the tools reach the provider in its own shape")
			}
			assert.Empty(t, mocks[k.kind].issues())
		})
	}
}

// Real providers compress their answers for clients that accept gzip, and
// SDKs accept it. The answer must still be translated and metered.
func TestAnswersOfProvidersThatCompressAreTranslatedAndMetered(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t, gzipWhenAsked)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			email := k.kind + "-gzip@example.com"
			secret := tg.newAccount(t, email, "10")
			keyID := tg.onlyKeyID(t, email)
			client := tg.client(secret)
			resp, err := client.Chat.Completions.New(context.Background(), paramsFor(k.model))
			require.NoError(t, err)
			assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
			got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor(k.model)))
			assert.Equal(t, mockFullText(), got.text)
			prompt, completion := mockUsage[k.kind][0], mockUsage[k.kind][1]
			for _, r := range tg.waitRecords(t, keyID, 2) {
				assert.Equal(t, prompt, r.PromptTokens)
				assert.Equal(t, completion, r.Completion)
				assert.False(t, r.Estimated, "metered from the provider's own counts")
			}
		})
	}
}

// TestTheDeveloperRoleReachesEveryProvider: OpenAI's `developer` message
// (what openai-go sends for DeveloperMessage) is accepted, passed as it is
// to OpenAI-type and Azure deployments, and becomes the system instruction
// of Anthropic and Gemini.
func TestTheDeveloperRoleReachesEveryProvider(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			secret := tg.newAccount(t, k.kind+"-developer@example.com", "10")
			p := paramsFor(k.model)
			p.Messages = []openai.ChatCompletionMessageParamUnion{
				openai.DeveloperMessage("Answer in French."),
				openai.UserMessage("Say hello."),
			}
			resp, err := tg.client(secret).Chat.Completions.New(context.Background(), p)
			require.NoError(t, err)
			assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
			reqs := mocks[k.kind].received()
			require.Len(t, reqs, 1)
			body, err := json.Marshal(reqs[0].Body)
			require.NoError(t, err)
			switch k.kind {
			case "openai", "azure":
				assert.Equal(t, "developer", gjson.GetBytes(body, "messages.0.role").String(), "%s", body)
			case "anthropic":
				assert.Contains(t, gjson.GetBytes(body, "system").Raw, "Answer in French.", "%s", body)
				assert.Equal(t, "user", gjson.GetBytes(body, "messages.0.role").String(), "%s", body)
			case "gemini":
				assert.Contains(t, gjson.GetBytes(body, "systemInstruction").Raw, "Answer in French.", "%s", body)
			}
		})
	}
}

// TestChunksCarryNoUsageKeyUnlessAskedAndNameTheModelAskedFor: Tollgate asks every
// provider for usage to meter streams, but the client's stream is what the
// provider would have sent it: no "usage" key on any chunk unless the
// client set include_usage (then "usage": null on each chunk and the counts
// on the last, as OpenAI sends them).
func TestChunksCarryNoUsageKeyUnlessAskedAndNameTheModelAskedFor(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			secret := tg.newAccount(t, k.kind+"-usage-key@example.com", "10")
			body := `{"model":"` + k.model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`
			resp, got := tg.post(t, secret, body)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
			require.Contains(t, string(got), "data: [DONE]")
			assert.NotContains(t, string(got), `"usage"`, "the client did not ask for usage")

			body = `{"model":"` + k.model + `","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
			resp, got = tg.post(t, secret, body)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
			assert.Contains(t, string(got), `"usage":null`, "null on the content chunks")
			assert.Contains(t, string(got), `"prompt_tokens"`, "the counts on the last chunk")
			// Every chunk names the model the client asked for, not the
			// provider's name for it.
			models := regexp.MustCompile(`"model":"([^"]*)"`).FindAllStringSubmatch(string(got), -1)
			require.NotEmpty(t, models)
			for _, m := range models {
				assert.Equal(t, k.model, m[1])
			}
			resp, got = tg.post(t, secret, `{"model":"`+k.model+`","messages":[{"role":"user","content":"hi"}]}`)
			require.Equal(t, http.StatusOK, resp.StatusCode, "%s", got)
			assert.Equal(t, k.model, gjson.GetBytes(got, "model").String(), "the answer names the model asked for")
		})
	}
}

// TestStructuredOutputWorksOnClaude: openai-go's structured outputs
// (response_format json_schema) through an Anthropic deployment give the
// JSON as the message's content, whole and streamed.
func TestStructuredOutputWorksOnClaude(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	secret := tg.newAccount(t, "structured@example.com", "10")
	client := tg.client(secret)
	p := paramsFor("claude-sonnet")
	p.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris as JSON.")}
	p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{
		OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
			Name: "weather", Strict: openai.Bool(true),
			Schema: map[string]any{"type": "object", "properties": map[string]any{
				"city": map[string]any{"type": "string"}, "temperature": map[string]any{"type": "number"}},
				"required": []string{"city", "temperature"}, "additionalProperties": false},
		}},
	}
	resp, err := client.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	var got struct {
		City        string  `json:"city"`
		Temperature float64 `json:"temperature"`
	}
	require.NoError(t, json.Unmarshal([]byte(resp.Choices[0].Message.Content), &got), resp.Choices[0].Message.Content)
	assert.Equal(t, "Paris", got.City)
	assert.Equal(t, 21.0, got.Temperature)
	assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
	assert.Empty(t, resp.Choices[0].Message.ToolCalls)

	streamed := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), p))
	require.NoError(t, json.Unmarshal([]byte(streamed.text), &got), streamed.text)
	assert.Equal(t, "Paris", got.City)
	assert.Equal(t, "stop", streamed.finish)
}

// TestAParameterTheProviderCannotHonourIsRefusedByName: no parameter is
// silently dropped — n: 2 to Claude is a 400 unsupported_parameter naming
// n, in OpenAI's error shape, recorded as a refusal; the same request to an
// OpenAI-type deployment is answered.
func TestAParameterTheProviderCannotHonourIsRefusedByName(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	secret := tg.newAccount(t, "params@example.com", "10")
	keyID := tg.onlyKeyID(t, "params@example.com")
	for _, c := range []struct{ model, extra, param string }{
		{"claude-sonnet", `"n":2`, "n"},
		{"claude-sonnet", `"seed":7`, "seed"},
		{"gemini-flash", `"logit_bias":{"50256":-100}`, "logit_bias"},
	} {
		resp, body := tg.post(t, secret, `{"model":"`+c.model+`",`+c.extra+`,"messages":[{"role":"user","content":"hi"}]}`)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
		assert.Equal(t, "unsupported_parameter", gjson.GetBytes(body, "error.code").String(), "%s", body)
		assert.Equal(t, c.param, gjson.GetBytes(body, "error.param").String())
		assert.Equal(t, "invalid_request_error", gjson.GetBytes(body, "error.type").String())
		assert.Contains(t, gjson.GetBytes(body, "error.message").String(), `"`+c.param+`"`)
	}
	assert.Empty(t, mocks["anthropic"].received(), "nothing reached the provider")
	resp, body := tg.post(t, secret, `{"model":"gpt-4o-mini","n":2,"seed":7,"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	records := tg.waitRecords(t, keyID, 4)
	assert.Equal(t, 400, records[0].Status)
}

// TestGeminiAnswersNChoicesWithLogprobs: n and logprobs reach Gemini as
// candidateCount and responseLogprobs, and come back as OpenAI's choices
// and logprobs — whole, and streamed through openai-go's accumulator.
func TestGeminiAnswersNChoicesWithLogprobs(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	secret := tg.newAccount(t, "choices@example.com", "10")
	client := tg.client(secret)
	p := paramsFor("gemini-flash")
	p.N = openai.Int(2)
	p.Logprobs = openai.Bool(true)
	p.TopLogprobs = openai.Int(2)

	resp, err := client.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)
	got := mocks["gemini"].received()
	require.NotEmpty(t, got)
	assert.Equal(t, map[string]any{"candidateCount": 2.0, "responseLogprobs": true, "logprobs": 2.0, "maxOutputTokens": 8192.0},
		got[len(got)-1].Body["generationConfig"], "with the held output limit, the model's")
	require.Len(t, resp.Choices, 2)
	for i, c := range resp.Choices {
		assert.EqualValues(t, i, c.Index)
		assert.Equal(t, mockFullText(), c.Message.Content)
		require.Len(t, c.Logprobs.Content, 1, "one token per text part")
		lp := c.Logprobs.Content[0]
		assert.Equal(t, mockFullText(), lp.Token)
		assert.Equal(t, -0.25, lp.Logprob)
		assert.Len(t, lp.Bytes, len(mockFullText()))
		require.Len(t, lp.TopLogprobs, 2)
		assert.Equal(t, "<alt>", lp.TopLogprobs[1].Token)
	}

	stream := client.Chat.Completions.NewStreaming(context.Background(), p)
	var acc openai.ChatCompletionAccumulator
	tokens := map[int64]string{}
	for stream.Next() {
		chunk := stream.Current()
		require.True(t, acc.AddChunk(chunk), "%s", chunk.RawJSON())
		for _, c := range chunk.Choices {
			for _, lp := range c.Logprobs.Content {
				tokens[c.Index] += lp.Token
			}
		}
	}
	require.NoError(t, stream.Err())
	require.Len(t, acc.Choices, 2)
	for i, c := range acc.Choices {
		assert.Equal(t, mockFullText(), c.Message.Content, "choice %d", i)
		assert.Equal(t, "stop", string(c.FinishReason))
		assert.Equal(t, mockFullText(), tokens[int64(i)], "choice %d: a logprob per streamed token", i)
	}
}
