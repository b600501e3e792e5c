package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider/schematest"
	"github.com/tollgate/tollgate/money"
)

// wireRecorder keeps every answer to /v1/responses as it came, so that a
// test can hold each to OpenAI's schema: the response object, or every
// event of a stream.
type wireRecorder struct {
	mu      sync.Mutex
	answers [][]byte
	streams [][]byte
}

func (w *wireRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/v1/responses") || resp.StatusCode != http.StatusOK {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	w.mu.Lock()
	defer w.mu.Unlock()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		w.streams = append(w.streams, body)
	} else {
		w.answers = append(w.answers, body)
	}
	return resp, nil
}

// requireConforms checks everything recorded against OpenAI's schema, and
// each stream's framing and order: "event: T" then "data: {…, type T}",
// sequence numbers from 0 without gaps, response.created first and
// response.completed (or response.failed) last.
func (w *wireRecorder) requireConforms(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(t, w.answers, "answers were recorded")
	require.NotEmpty(t, w.streams, "streams were recorded")
	for _, a := range w.answers {
		if gjson.GetBytes(a, "object").String() == "response" {
			requireSchema(t, schematest.Response, a)
		}
	}
	for _, s := range w.streams {
		events := responseEvents(t, s)
		require.NotEmpty(t, events)
		assert.Equal(t, "response.created", events[0].Get("type").String())
		last := events[len(events)-1].Get("type").String()
		assert.Contains(t, []string{"response.completed", "response.failed"}, last)
		for i, ev := range events {
			assert.EqualValues(t, i, ev.Get("sequence_number").Int(), "sequence numbers count from 0")
			requireSchema(t, schematest.ResponseEvent, []byte(ev.Raw))
		}
	}
}

// responseEvents reads a Responses stream's events, holding them to its
// framing.
func responseEvents(t *testing.T, stream []byte) []gjson.Result {
	t.Helper()
	var out []gjson.Result
	r := bufio.NewReader(bytes.NewReader(stream))
	for {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) {
			require.Empty(t, line, "the stream ends inside a line")
			return out
		}
		name, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "event: ")
		require.True(t, ok, "not an event line: %q", line)
		data, err := r.ReadString('\n')
		require.NoError(t, err)
		payload, ok := strings.CutPrefix(strings.TrimSuffix(data, "\n"), "data: ")
		require.True(t, ok, "not a data line: %q", data)
		blank, err := r.ReadString('\n')
		require.NoError(t, err)
		require.Equal(t, "\n", blank)
		ev := gjson.Parse(payload)
		require.Equal(t, name, ev.Get("type").String(), "the event line names the data's type")
		out = append(out, ev)
	}
}

func responsesClient(tg *tollgate, secret string, rec *wireRecorder) *openai.Client {
	return tg.client(secret, option.WithHTTPClient(&http.Client{Transport: rec}))
}

func responseTools() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{
		responses.ToolParamOfFunction("get_weather", map[string]any{
			"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"},
		}, false),
		responses.ToolParamOfFunction("get_time", map[string]any{"type": "object", "properties": map[string]any{}}, false),
	}
}

// TestTheResponsesAPIOnEveryProvider drives /v1/responses on every provider
// type, translated to each provider's own API (see exerciseResponses).
func TestTheResponsesAPIOnEveryProvider(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			exerciseResponses(t, tg, mocks[k.kind], k.kind, k.model)
			for _, r := range mocks[k.kind].received() {
				assert.NotEqual(t, "/v1/responses", r.Path, "translated: the provider is asked in its own API")
			}
		})
	}
}

// TestTheResponsesAPIIsRelayedToAServerThatSpeaksIt: an OpenAI provider
// with responses_api gets Responses requests (the whole conversation, store
// false, its model and credential), and its answers reach the client with
// Tollgate's ids, exactly as a translated answer would.
func TestTheResponsesAPIIsRelayedToAServerThatSpeaksIt(t *testing.T) {
	t.Parallel()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind)
	}
	cfg := strings.Replace(providersConfig(mocks), "api_key: sk-openai-secret}", "api_key: sk-openai-secret, responses_api: true}", 1)
	require.Contains(t, cfg, "responses_api: true")
	tg := startTollgate(t, cfg, "")
	exerciseResponses(t, tg, mocks["openai"], "openai", "gpt-4o-mini")
	reqs := mocks["openai"].received()
	require.NotEmpty(t, reqs)
	for _, r := range reqs {
		assert.Equal(t, "/v1/responses", r.Path)
		assert.Equal(t, "gpt-4o-mini-2024-07-18", r.Body["model"], "the deployment's model")
	}
	last, _ := json.Marshal(reqs[3].Body["input"])
	assert.Contains(t, string(last), `"type":"function_call_output"`, "the continued turn, as Responses items")
	assert.Contains(t, string(last), `"type":"function_call"`)
}

// exerciseResponses drives /v1/responses with openai-go's Responses client
// against one provider: text, streamed text, a function call round trip
// through previous_response_id, stored responses read and deleted; every
// answer and event conforms to OpenAI's schema and every request is metered
// exactly as the provider reported it.
func exerciseResponses(t *testing.T, tg *tollgate, mock *mockProvider, kind, model string) {
	t.Helper()
	k := struct{ kind, model string }{kind, model}
	mocks := map[string]*mockProvider{kind: mock}
	ctx := context.Background()
	email := k.kind + "-responses@example.com"
	secret := tg.newAccount(t, email, "10")
	keyID := tg.onlyKeyID(t, email)
	rec := &wireRecorder{}
	client := responsesClient(tg, secret, rec)
	prompt, completion := mockUsage[k.kind][0], mockUsage[k.kind][1]
	cost := costOf(prompt, completion)
	want := usageRecord{Model: k.model, Provider: k.kind, PromptTokens: prompt, Completion: completion, Cost: cost, Status: 200}

	// Text.
	r, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: k.model, Instructions: openai.String("Be brief."),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
	})
	require.NoError(t, err)
	assert.Equal(t, mockFullText(), r.OutputText())
	assert.Equal(t, responses.ResponseStatusCompleted, r.Status)
	assert.Equal(t, k.model, string(r.Model))
	assert.Equal(t, "Be brief.", r.Instructions.OfString)
	assert.Equal(t, prompt, r.Usage.InputTokens, "the provider's own counts")
	assert.Equal(t, completion, r.Usage.OutputTokens)
	assert.Equal(t, []usageRecord{want}, tg.waitRecords(t, keyID, 1))
	assert.Equal(t, 10*money.PerDollar-cost, tg.balance(t, email), "the balance fell by exactly the cost")

	// Streamed text.
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: k.model, Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hello.")},
	})
	var text string
	var completed responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.completed":
			completed = ev.Response
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, mockFullText(), text)
	assert.Equal(t, mockFullText(), completed.OutputText())
	assert.Equal(t, prompt, completed.Usage.InputTokens)
	assert.Equal(t, completion, completed.Usage.OutputTokens)
	assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2))

	// A function call round trip: the calls, then their outputs
	// after previous_response_id.
	calls, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: k.model, Tools: responseTools(),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather and time in Paris?")},
	})
	require.NoError(t, err)
	var outputs responses.ResponseInputParam
	var names, args []string
	for _, item := range calls.Output {
		if item.Type != "function_call" {
			continue
		}
		fc := item.AsFunctionCall()
		names, args = append(names, fc.Name), append(args, fc.Arguments)
		require.NotEmpty(t, fc.CallID)
		out := responses.ResponseInputItemParamOfFunctionCallOutput(`{"ok":true}`)
		out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
		outputs = append(outputs, out)
	}
	assert.Equal(t, []string{"get_weather", "get_time"}, names)
	require.Len(t, args, 2)
	assert.JSONEq(t, mockToolCalls[0].arguments(), args[0])
	answer, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: k.model, PreviousResponseID: openai.String(calls.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: outputs},
	})
	require.NoError(t, err)
	assert.Equal(t, mockFullText(), answer.OutputText())
	assert.Equal(t, calls.ID, answer.PreviousResponseID)
	reqs := mocks[k.kind].received()
	require.Len(t, reqs, 4)
	last, _ := json.Marshal(reqs[3].Body)
	for _, part := range []string{"Weather and time in Paris?", "get_weather", "Paris", "ok"} {
		assert.Contains(t, string(last), part, "the provider got the earlier turn and the tool outputs, in its own shape")
	}
	assert.Empty(t, mocks[k.kind].issues())

	// Stored: read, deleted, then gone; not stored: never found.
	got, err := client.Responses.Get(ctx, answer.ID, responses.ResponseGetParams{})
	require.NoError(t, err)
	assert.Equal(t, answer.ID, got.ID)
	assert.Equal(t, mockFullText(), got.OutputText())
	require.NoError(t, client.Responses.Delete(ctx, answer.ID))
	_, err = client.Responses.Get(ctx, answer.ID, responses.ResponseGetParams{})
	requireAPIError(t, err, http.StatusNotFound)
	unstored, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Model: k.model, Store: openai.Bool(false), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	require.NoError(t, err)
	_, err = client.Responses.Get(ctx, unstored.ID, responses.ResponseGetParams{})
	requireAPIError(t, err, http.StatusNotFound)
	_, err = client.Responses.New(ctx, responses.ResponseNewParams{
		Model: k.model, PreviousResponseID: openai.String(unstored.ID), Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and?")},
	})
	requireAPIError(t, err, http.StatusBadRequest)

	recs := tg.waitRecords(t, keyID, 5) // the refused one is counted, not recorded
	assert.Equal(t, "previous_response_not_found", tg.waitRefusals(t, keyID, 1)[0].Code)
	var total money.Nanos
	for _, r := range recs {
		total += r.Cost
	}
	assert.Equal(t, 10*money.PerDollar-total, tg.balance(t, email), "every request metered, and the balance fell by their sum")
	rec.requireConforms(t)
}

// requireAPIError checks err is an API error of the status, in OpenAI's
// shape.
func requireAPIError(t *testing.T, err error, status int) {
	t.Helper()
	var apiErr *openai.Error
	require.ErrorAs(t, err, &apiErr)
	assert.Equal(t, status, apiErr.StatusCode, "%s", apiErr.RawJSON())
	assert.NotEmpty(t, apiErr.Message)
}

// TestAStoredResponseIsItsAccountsAlone: another account's key can neither
// read, delete nor continue it; each is told it does not exist.
func TestAStoredResponseIsItsAccountsAlone(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	ctx := context.Background()
	owner := tg.client(tg.newAccount(t, "owner@example.com", "10"))
	other := tg.client(tg.newAccount(t, "other@example.com", "10"))
	r, err := owner.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	require.NoError(t, err)
	_, err = other.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	requireAPIError(t, err, http.StatusNotFound)
	requireAPIError(t, other.Responses.Delete(ctx, r.ID), http.StatusNotFound)
	_, err = other.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("and?")}})
	requireAPIError(t, err, http.StatusBadRequest)
	got, err := owner.Responses.Get(ctx, r.ID, responses.ResponseGetParams{})
	require.NoError(t, err, "still there for its owner")
	assert.Equal(t, r.ID, got.ID)
}

// TestAResponsesParameterTheProviderCannotHonourIsRefusedByItsName: the
// refusal names the parameter as the Responses API calls it.
func TestAResponsesParameterTheProviderCannotHonourIsRefusedByItsName(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	secret := tg.newAccount(t, "params@example.com", "10")
	for _, c := range []struct{ model, body, param string }{
		{"claude-sonnet", `{"model":"claude-sonnet","input":"hi","reasoning":{"effort":"high"}}`, "reasoning.effort"},
		{"gpt-4o-mini", `{"model":"gpt-4o-mini","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type"},
		{"gpt-4o-mini", `{"model":"gpt-4o-mini","input":"hi","conversation":"conv_1"}`, "conversation"},
	} {
		req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/responses", strings.NewReader(c.body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s", body)
		requireSchema(t, schemaError, body)
		assert.Equal(t, c.param, gjson.GetBytes(body, "error.param").String(), "%s", body)
		assert.Equal(t, "unsupported_parameter", gjson.GetBytes(body, "error.code").String())
	}
	for kind, m := range mocks {
		assert.Zero(t, m.count(), "%s: nothing reached a provider", kind)
	}
}

// TestAConversationIsBoundedWithItsEarlierTurns: continuing a response
// turn after turn grows the request past any body limit; past four times
// max_body_bytes it is refused by name, and nothing reaches a provider.
func TestAConversationIsBoundedWithItsEarlierTurns(t *testing.T) {
	t.Parallel()
	mocks := map[string]*mockProvider{}
	for _, k := range providerKinds {
		mocks[k.kind] = newMockProvider(t, k.kind)
	}
	tg := startTollgate(t, "max_body_bytes: 2048\n"+providersConfig(mocks), "")
	client := tg.client(tg.newAccount(t, "long@example.com", "10"))
	ctx := context.Background()
	turn := strings.Repeat("word ", 300) // 1500 bytes: within the body limit
	prev := ""
	for i := range 8 {
		p := responses.ResponseNewParams{Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(turn)}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		r, err := client.Responses.New(ctx, p)
		if err != nil {
			var apiErr *openai.Error
			require.ErrorAs(t, err, &apiErr)
			assert.Equal(t, http.StatusBadRequest, apiErr.StatusCode)
			assert.Equal(t, "conversation_too_long", apiErr.Code)
			assert.Equal(t, "previous_response_id", apiErr.Param)
			assert.GreaterOrEqual(t, i, 4, "refused only past four times the body limit (8 KiB)")
			assert.Equal(t, i, mocks["openai"].count(), "the refused turn never reached the provider")
			return
		}
		prev = r.ID
	}
	t.Fatal("a conversation of 8 turns of 1.5 KB was never refused")
}

// TestAResponsesBodyOverTheLimitIs413: a Responses request's own body is
// held to max_body_bytes like a chat completion's, though its route
// (under Envoy) buffers four times that for the conversation.
func TestAResponsesBodyOverTheLimitIs413(t *testing.T) {
	t.Parallel()
	p := newMockProvider(t, "openai")
	tg := startTollgate(t, "max_body_bytes: 2048\n"+configFor(p.URL), "")
	secret := tg.newAccount(t, "big@example.com", "10")
	body := `{"model":"gpt-4o-mini","input":"` + strings.Repeat("a", 3000) + `"}`
	resp, data := tg.do(t, http.MethodPost, "/responses", secret, body)
	assert.Equal(t, http.StatusRequestEntityTooLarge, resp.StatusCode, "%s", data)
	requireSchema(t, schemaError, data)
	assert.Equal(t, "request_too_large", gjson.GetBytes(data, "error.code").String(), "%s", data)
	assert.Zero(t, p.count(), "nothing reached the provider")
}
