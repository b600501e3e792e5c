package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// kindsConfigFor is configFor with a model of every kind on the mock.
func kindsConfigFor(providerURL string) string { return withEveryKind(configFor(providerURL)) }

// withEveryKind is cfg with a model of every kind but chat, each on the
// provider named openai: embed, instruct, mod and rerank.
func withEveryKind(cfg string) string {
	return strings.Replace(cfg, "plans:", `  - id: embed
    kind: embedding
    input_price_per_million: 0.02
    deployments: [{provider: openai, model: text-embedding-3-small}]
  - id: instruct
    kind: completion
    max_tokens: 4096
    input_price_per_million: 1.50
    output_price_per_million: 2.00
    deployments: [{provider: openai, model: gpt-3.5-turbo-instruct}]
  - id: mod
    kind: moderation
    deployments: [{provider: openai, model: omni-moderation-latest}]
  - id: rerank
    kind: rerank
    search_unit_price: 0.002
    deployments: [{provider: openai, model: rerank-v3.5}]
plans:`, 1)
}

// kindModels are the models withEveryKind adds that the client matrices
// call, by the environment variable that tells a matrix's script each.
var kindModels = map[string]string{
	"TOLLGATE_EMBEDDING_MODEL":  "embed",
	"TOLLGATE_COMPLETION_MODEL": "instruct",
	"TOLLGATE_MODERATION_MODEL": "mod",
	"TOLLGATE_RERANK_MODEL":     "rerank",
}

// requireAnsweredCalls waits until the key has, of each model of calls,
// that many usage records, and holds them to exactly that many, each with
// status 200.
func requireAnsweredCalls(t *testing.T, tg *tollgate, keyID string, calls map[string]int) {
	t.Helper()
	var recs []usageRecord
	got := map[string]int{}
	eventually(t, func() bool {
		recs, got = tg.usageRecords(t, keyID), map[string]int{}
		for _, r := range recs {
			if _, ok := calls[r.Model]; ok {
				got[r.Model]++
			}
		}
		for m, n := range calls {
			if got[m] < n {
				return false
			}
		}
		return true
	}, "the usage records of %v", calls)
	require.Equal(t, calls, got, "one usage record a call")
	for _, r := range recs {
		if _, ok := calls[r.Model]; ok {
			assert.Equal(t, http.StatusOK, r.Status, "%+v", r)
		}
	}
}

// TestARAGFlowIsServedBilledExactlyAndStoppedByItsBudget: a retrieval
// application's calls under one key with a daily budget of exactly what
// they cost — a chat and a streamed legacy completion, 200 documents
// embedded in batches of 50 (floats, then base64), a rerank of them and
// a moderation — are each answered in its API's shape, recorded once at
// its model's price and charged exactly; the spent budget then refuses
// the next call of any priced endpoint with 429 budget_exceeded.
func TestARAGFlowIsServedBilledExactlyAndStoppedByItsBudget(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, kindsConfigFor(p.URL), "")
	secret := tg.newAccount(t, "rag@example.com", "10")
	keyID := tg.onlyKeyID(t, "rag@example.com")
	// The mock reports 9 prompt and 5 completion tokens an answer: the
	// flow costs four embeddings, one search unit, a chat and a
	// completion. A daily key budget of exactly that admits the flow
	// and is spent by it.
	total := 4*money.Cost(9, money.PerDollar/50) + money.PerDollar/500 + mockCost +
		money.Add(money.Cost(9, 3*money.PerDollar/2), money.Cost(5, 2*money.PerDollar))
	tg.run(t, "key", "budget", "set", keyID, "--period", "day", "--amount", total.String())

	docs := make([]string, 200)
	for i := range docs {
		docs[i] = fmt.Sprintf("Document %d: the tollgate of bridge %d opens at %d o'clock.", i, i%17, i%24)
	}
	query := "When does the tollgate of bridge 3 open?"
	best := "The tollgate of bridge 3 opens at 3 o'clock."
	resp, body := doPastHolds(t, tg, "/chat/completions", secret, `{"model":"gpt-4o-mini","max_tokens":64,"messages":[{"role":"system","content":"`+best+`"},{"role":"user","content":"`+query+`"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)

	resp, body = doPastHolds(t, tg, "/completions", secret, `{"model":"instruct","prompt":"Summarise: `+best+`","max_tokens":8,"stream":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	chunks, done := 0, false
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		switch {
		case !ok:
		case data == "[DONE]":
			done = true
		default:
			chunks++
			assert.Equal(t, "text_completion", gjson.Get(data, "object").Str, data)
			assert.False(t, gjson.Get(data, "usage").IsObject(), "no usage chunk the client did not ask for: %s", data)
		}
	}
	assert.True(t, done)
	assert.Positive(t, chunks)

	for batch := range 4 {
		part := docs[50*batch : 50*batch+50]
		in, err := json.Marshal(part)
		require.NoError(t, err)
		format := "float"
		if batch%2 == 1 {
			format = "base64"
		}
		resp, body = doPastHolds(t, tg, "/embeddings", secret,
			`{"model":"embed","dimensions":8,"encoding_format":"`+format+`","input":`+string(in)+`}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Equal(t, "embed", gjson.GetBytes(body, "model").Str, "the client's model name")
		require.EqualValues(t, 50, gjson.GetBytes(body, "data.#").Int())
		if format == "float" {
			for i, d := range part[:3] {
				want := mockllm.Embedding(d, 8)
				got := gjson.GetBytes(body, "data."+strconv.Itoa(i)+".embedding").Array()
				require.Len(t, got, 8)
				for j := range want {
					assert.InDelta(t, want[j], got[j].Float(), 1e-6)
				}
			}
		} else {
			assert.Equal(t, gjson.String, gjson.GetBytes(body, "data.0.embedding").Type, "base64 as asked")
		}
	}

	rerankDocs, err := json.Marshal(docs[:20])
	require.NoError(t, err)
	resp, body = doPastHolds(t, tg, "/rerank", secret,
		`{"model":"rerank","query":"`+query+`","documents":`+string(rerankDocs)+`,"top_n":3,"return_documents":true}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	results := gjson.GetBytes(body, "results").Array()
	require.Len(t, results, 3)
	assert.GreaterOrEqual(t, results[0].Get("relevance_score").Float(), results[2].Get("relevance_score").Float())

	resp, body = tg.do(t, http.MethodPost, "/moderations", secret, `{"input":["`+query+`","a forbidden thing"]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.False(t, gjson.GetBytes(body, "results.0.flagged").Bool())
	assert.True(t, gjson.GetBytes(body, "results.1.flagged").Bool())

	const calls = 4 + 1 + 1 + 1 + 1
	var recs []store.UsageRecord
	eventually(t, func() bool {
		recs, err = tg.Store.UsageRecords(context.Background(), keyID, 100)
		require.NoError(t, err)
		return len(recs) == calls
	}, "every call recorded once")
	var spent money.Nanos
	byModel := map[string]int{}
	endpointOf := map[string]string{"embed": "embeddings", "rerank": "rerank", "gpt-4o-mini": "chat", "instruct": "completions", "mod": "moderations"}
	for _, r := range recs {
		assert.Equal(t, http.StatusOK, r.Status, "%+v", r)
		assert.Equal(t, endpointOf[r.Model], r.Endpoint, "the record names its endpoint")
		byModel[r.Model]++
		spent += r.Cost
		switch r.Model {
		case "embed":
			assert.Equal(t, money.Cost(r.PromptTokens, money.PerDollar/50), r.Cost, "input tokens at $0.02/M")
			assert.Zero(t, r.CompletionTokens)
		case "rerank":
			assert.Equal(t, money.PerDollar/500, r.Cost, "one search unit at $0.002")
		case "mod":
			assert.Zero(t, r.Cost, "an unpriced moderation is free")
		case "instruct":
			assert.Equal(t, money.Add(money.Cost(r.PromptTokens, 3*money.PerDollar/2), money.Cost(r.CompletionTokens, 2*money.PerDollar)), r.Cost)
			assert.LessOrEqual(t, r.CompletionTokens, int64(8))
		}
	}
	assert.Equal(t, map[string]int{"embed": 4, "rerank": 1, "gpt-4o-mini": 1, "instruct": 1, "mod": 1}, byModel)
	eventually(t, func() bool { return tg.balance(t, "rag@example.com") == 10*money.PerDollar-spent }, "the balance is charged exactly what the records say")

	assert.Equal(t, total, spent)
	var usage struct {
		ByEndpoint []struct {
			Endpoint string `json:"endpoint"`
			Requests int64  `json:"requests"`
		} `json:"by_endpoint"`
	}
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "key", "usage", keyID, "--json")), &usage))
	requests := map[string]int64{}
	for _, e := range usage.ByEndpoint {
		requests[e.Endpoint] = e.Requests
	}
	assert.Equal(t, map[string]int64{"embeddings": 4, "rerank": 1, "chat": 1, "completions": 1, "moderations": 1}, requests,
		"the usage view by endpoint")

	// The budget is spent: the next call of any priced endpoint is
	// refused (a free moderation holds nothing, and is not).
	for _, call := range []struct{ path, body string }{
		{"/embeddings", `{"model":"embed","input":"one more"}`},
		{"/rerank", `{"model":"rerank","query":"q","documents":["d"]}`},
		{"/completions", `{"model":"instruct","prompt":"x"}`},
		{"/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`},
	} {
		resp, body := tg.do(t, http.MethodPost, call.path, secret, call.body)
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s: %s", call.path, body)
		assert.Equal(t, "budget_exceeded", gjson.GetBytes(body, "error.code").Str, "%s: %s", call.path, body)
	}
}

// TestEachEndpointRefusesAModelOfAnotherKind: a chat model on the
// embeddings path, an embedding model on chat, and a bad input get a 400
// naming the parameter, before anything is held or sent; the model list
// names each model's kind.
func TestEachEndpointRefusesAModelOfAnotherKind(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, kindsConfigFor(p.URL), "")
	secret := tg.newAccount(t, "kinds@example.com", "10")
	for _, tc := range []struct{ path, body, param, message string }{
		{"/embeddings", `{"model":"gpt-4o-mini","input":"x"}`, "model", `The model "gpt-4o-mini" is a chat model: send it to /v1/chat/completions (or /v1/responses, /v1/messages).`},
		{"/chat/completions", `{"model":"embed","messages":[{"role":"user","content":"x"}]}`, "model", `The model "embed" is an embedding model: send it to /v1/embeddings.`},
		{"/embeddings", `{"model":"embed","input":["a",""]}`, "input[1]", "input[1] must not be empty."},
		{"/completions", `{"model":"instruct","prompt":"x","stop":["a","b","c","d","e"]}`, "stop", "stop must be a string or an array of up to 4 strings."},
		{"/rerank", `{"model":"rerank","query":"","documents":["a"]}`, "query", "query must be a non-empty string."},
	} {
		resp, body := tg.do(t, http.MethodPost, tc.path, secret, tc.body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "%s %s", tc.path, body)
		requireSchema(t, schemaError, body)
		assert.Equal(t, tc.param, gjson.GetBytes(body, "error.param").Str, "%s", body)
		assert.Equal(t, tc.message, gjson.GetBytes(body, "error.message").Str)
	}
	assert.Empty(t, p.received(), "nothing reached the provider")

	// GET /v1/models names each model's kind.
	resp, body := tg.do(t, http.MethodGet, "/models", secret, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	requireSchema(t, schemaModelList, body)
	kinds := map[string]string{}
	for _, m := range gjson.GetBytes(body, "data").Array() {
		kinds[m.Get("id").Str] = m.Get("kind").Str
	}
	assert.Equal(t, map[string]string{"gpt-4o-mini": "chat", "embed": "embedding", "instruct": "completion", "mod": "moderation", "rerank": "rerank"}, kinds)
}

// doPastHolds posts body to path as a client honouring Retry-After does:
// a momentary budget_held refusal (the budget's money is leased to
// requests just ended, given back within seconds) is tried again.
func doPastHolds(t *testing.T, tg *tollgate, path, secret, body string) (*http.Response, []byte) {
	t.Helper()
	var resp *http.Response
	var got []byte
	eventually(t, func() bool {
		resp, got = tg.do(t, http.MethodPost, path, secret, body)
		return resp.StatusCode != http.StatusTooManyRequests || gjson.GetBytes(got, "error.code").Str != "budget_held"
	}, "%s: past the holds of requests just ended", path)
	return resp, got
}

// TestABatchOfEmbeddingsLargerThanEnvoyBuffersIsAnsweredWhole: a batch
// whose answer (floats as JSON text, 3,072 dimensions) is several times
// what Envoy buffers for a request reaches the client whole, in order,
// and is recorded once.
func TestABatchOfEmbeddingsLargerThanEnvoyBuffersIsAnsweredWhole(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, kindsConfigFor(p.URL), "")
	secret := tg.newAccount(t, "batch@example.com", "10")
	in := make([]string, 64)
	for i := range in {
		in[i] = fmt.Sprintf("passage %d of a long report", i)
	}
	b, err := json.Marshal(in)
	require.NoError(t, err)
	resp, body := tg.do(t, http.MethodPost, "/embeddings", secret, `{"model":"embed","dimensions":3072,"input":`+string(b)+`}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%.300s", body)
	assert.Greater(t, len(body), 2<<20, "past Envoy's buffers")
	data := gjson.GetBytes(body, "data").Array()
	require.Len(t, data, len(in))
	for i, d := range data {
		assert.EqualValues(t, i, d.Get("index").Int())
	}
	last := data[len(data)-1].Get("embedding").Array()
	require.Len(t, last, 3072)
	assert.InDelta(t, mockllm.Embedding(in[len(in)-1], 3072)[3071], last[3071].Float(), 1e-6)
	tg.waitRecords(t, tg.onlyKeyID(t, "batch@example.com"), 1)
}
