package extproc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
)

// kindsConfig has a model of every kind, priced.
const kindsConfig = `
providers:
  - {name: openai, type: openai, base_url: "http://openai.test/v1", api_key: sk-test}
models:
  - id: gpt-4o-mini
    max_tokens: 100
    input_price_per_million: 1
    output_price_per_million: 2
    deployments: [{provider: openai, model: gpt-4o-mini-2024}]
  - id: embed
    kind: embedding
    input_price_per_million: 1
    deployments: [{provider: openai, model: text-embedding-3-small}]
  - id: instruct
    kind: completion
    max_tokens: 50
    input_price_per_million: 1
    output_price_per_million: 2
    deployments: [{provider: openai, model: gpt-3.5-turbo-instruct}]
  - id: mod
    kind: moderation
    deployments: [{provider: openai, model: omni-moderation-latest}]
  - id: rerank-units
    kind: rerank
    search_unit_price: 2
    deployments: [{provider: openai, model: rerank-v3.5}]
  - id: rerank-tokens
    kind: rerank
    input_price_per_million: 1
    deployments: [{provider: openai, model: jina-reranker-v2}]
plans:
  - {name: pro, models: ["*"]}
`

func kindsCfg(t testing.TB) *config.Config {
	t.Helper()
	c, err := config.Parse([]byte(kindsConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	return c
}

type endpointCheck = func([]byte, *config.Config) (validChat, *oaierror.Error)

// Each endpoint's check takes what its API documents and refuses the
// rest with the parameter named; a model of another kind is refused,
// naming the path that serves it, and so is a non-chat model on chat.
func TestEndpointChecksTakeTheirOwnRequestsOnly(t *testing.T) {
	cfg := kindsCfg(t)
	for _, tc := range []struct {
		name        string
		check       endpointCheck
		body        string
		code, param string // "" when valid
	}{
		{"embedding string", checkEmbeddings, `{"model":"embed","input":"hi"}`, "", ""},
		{"embedding strings", checkEmbeddings, `{"model":"embed","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`, "", ""},
		{"embedding tokens", checkEmbeddings, `{"model":"embed","input":[1,2,3]}`, "", ""},
		{"embedding token arrays", checkEmbeddings, `{"model":"embed","input":[[1,2],[3]]}`, "", ""},
		{"embedding without input", checkEmbeddings, `{"model":"embed"}`, "invalid_request", "input"},
		{"embedding empty string", checkEmbeddings, `{"model":"embed","input":""}`, "invalid_request", "input"},
		{"embedding empty item", checkEmbeddings, `{"model":"embed","input":["a",""]}`, "invalid_request", "input[1]"},
		{"embedding empty array", checkEmbeddings, `{"model":"embed","input":[]}`, "invalid_request", "input"},
		{"embedding object input", checkEmbeddings, `{"model":"embed","input":{"a":1}}`, "invalid_request", "input"},
		{"embedding negative token", checkEmbeddings, `{"model":"embed","input":[1,-2]}`, "invalid_request", "input"},
		{"embedding bad format", checkEmbeddings, `{"model":"embed","input":"x","encoding_format":"int8"}`, "invalid_request", "encoding_format"},
		{"embedding zero dimensions", checkEmbeddings, `{"model":"embed","input":"x","dimensions":0}`, "invalid_request", "dimensions"},
		{"embedding key twice", checkEmbeddings, `{"model":"embed","input":"x","input":"y"}`, "invalid_request", "input"},
		{"embedding not JSON", checkEmbeddings, `{"model":`, "invalid_request", ""},
		{"embedding with a chat model", checkEmbeddings, `{"model":"gpt-4o-mini","input":"x"}`, "invalid_model", "model"},
		{"embedding unknown model", checkEmbeddings, `{"model":"nope","input":"x"}`, "invalid_model", "model"},
		{"chat with an embedding model", validate, `{"model":"embed","messages":[{"role":"user","content":"hi"}]}`, "invalid_model", "model"},
		{"completion", checkCompletions, `{"model":"instruct","prompt":"Say this","max_tokens":7,"n":2,"best_of":3,"stop":["\n"],"temperature":0,"echo":true,"logprobs":2}`, "", ""},
		{"completion streamed with usage", checkCompletions, `{"model":"instruct","prompt":["a","b"],"stream":true,"stream_options":{"include_usage":true}}`, "", ""},
		{"completion without prompt", checkCompletions, `{"model":"instruct"}`, "invalid_request", "prompt"},
		{"completion max_tokens too large", checkCompletions, `{"model":"instruct","prompt":"x","max_tokens":51}`, "invalid_max_tokens", "max_tokens"},
		{"completion five stops", checkCompletions, `{"model":"instruct","prompt":"x","stop":["a","b","c","d","e"]}`, "invalid_stop", "stop"},
		{"completion hot", checkCompletions, `{"model":"instruct","prompt":"x","temperature":2.5}`, "invalid_request", "temperature"},
		{"completion best_of under n", checkCompletions, `{"model":"instruct","prompt":"x","n":3,"best_of":2}`, "invalid_request", "best_of"},
		{"completion stream_options alone", checkCompletions, `{"model":"instruct","prompt":"x","stream_options":{"include_usage":true}}`, "invalid_request", "stream_options"},
		{"completion with a chat model", checkCompletions, `{"model":"gpt-4o-mini","prompt":"x"}`, "invalid_model", "model"},
		{"moderation", checkModerations, `{"model":"mod","input":"x"}`, "", ""},
		{"moderation without a model", checkModerations, `{"input":["x","y"]}`, "", ""},
		{"moderation parts", checkModerations, `{"input":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}`, "", ""},
		{"moderation bad part", checkModerations, `{"input":[{"type":"audio"}]}`, "invalid_request", "input"},
		{"rerank", checkRerank, `{"model":"rerank-units","query":"q","documents":["a",{"text":"b"}],"top_n":1,"return_documents":true}`, "", ""},
		{"rerank empty query", checkRerank, `{"model":"rerank-units","query":"","documents":["a"]}`, "invalid_request", "query"},
		{"rerank no documents", checkRerank, `{"model":"rerank-units","query":"q","documents":[]}`, "invalid_request", "documents"},
		{"rerank number document", checkRerank, `{"model":"rerank-units","query":"q","documents":[5]}`, "invalid_request", "documents"},
		{"rerank top_n zero", checkRerank, `{"model":"rerank-units","query":"q","documents":["a"],"top_n":0}`, "invalid_request", "top_n"},
		{"rerank with an embedding model", checkRerank, `{"model":"embed","query":"q","documents":["a"]}`, "invalid_model", "model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cr, e := tc.check([]byte(tc.body), cfg)
			if tc.code == "" {
				require.Nil(t, e, "%v", e)
				require.NotNil(t, cr.Model)
				assert.Positive(t, cr.PromptBound)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, 400, e.Status)
			assert.Equal(t, tc.code, e.Code)
			assert.Equal(t, tc.param, e.Param)
		})
	}
	_, e := checkEmbeddings([]byte(`{"model":"gpt-4o-mini","input":"x"}`), cfg)
	assert.Equal(t, `The model "gpt-4o-mini" is a chat model: send it to /v1/chat/completions (or /v1/responses, /v1/messages).`, e.Message)
	_, e = validate([]byte(`{"model":"embed","messages":[{"role":"user","content":"hi"}]}`), cfg)
	assert.Equal(t, `The model "embed" is an embedding model: send it to /v1/embeddings.`, e.Message)
}

// What each endpoint holds bounds what it can cost: an input's bytes or
// tokens a token, plus an allowance an item; a completion's max_tokens
// (16 by default) for each prompt's max(n, best_of) answers; a rerank's
// query beside each document, or Cohere's search units.
func TestEndpointBoundsAreUpperBounds(t *testing.T) {
	cfg := kindsCfg(t)
	cr, e := checkEmbeddings([]byte(`{"model":"embed","input":["héllo",[1,2,3]]}`), cfg)
	require.Nil(t, e)
	assert.EqualValues(t, len("héllo")+3+2*inputAllowance, cr.PromptBound)
	assert.Zero(t, cr.MaxTokens)

	cr, e = checkCompletions([]byte(`{"model":"instruct","prompt":["a","bc"],"n":2,"best_of":3}`), cfg)
	require.Nil(t, e)
	assert.EqualValues(t, DefaultCompletionTokens, cr.MaxTokens)
	assert.EqualValues(t, 2*3, cr.Choices, "every prompt answered best_of times")
	assert.EqualValues(t, 3+2*inputAllowance, cr.PromptBound)
	assert.False(t, cr.LimitSent, "the held max_tokens is written")

	docs := `"documents":["` + strings.Repeat("x", 990) + `"` + strings.Repeat(`,"d"`, 100) + `]`
	cr, e = checkRerank([]byte(`{"model":"rerank-units","query":"qq",`+docs+`}`), cfg)
	require.Nil(t, e)
	// The long document is 3 chunks of 500 with the query; 103 chunks
	// are 2 search units.
	assert.EqualValues(t, 2, cr.Units)
	assert.EqualValues(t, (2+990+inputAllowance)+100*(2+1+inputAllowance), cr.PromptBound)
}

// Through the router and upstream steps: an embedding request is held
// its input's bound at the input price, goes to the provider's
// embeddings path as the client sent it but for the model's name, and
// is recorded at the provider's prompt tokens; a completion carries its
// held max_tokens; a rerank priced by search units holds and bills them.
func TestEndpointRequestsAreHeldRoutedAndRecorded(t *testing.T) {
	withKinds := func(g *rig) {
		cfg := kindsCfg(t)
		g.cfg = cfg
		g.opt.Config = func() *config.Config { return cfg }
	}
	g := newRig(t, withKinds)
	body := `{"model":"embed","input":["The food was delicious"]}`
	x, routed := g.admitted(contract.PathEmbeddings, body)
	assert.Nil(t, routed.GetRequestBody().GetResponse().GetBodyMutation(), "the body goes on as it is")
	bound := int64(len("The food was delicious") + inputAllowance)
	assert.Equal(t, []money.Nanos{money.Cost(bound, money.PerDollar)}, g.balance.holds)
	dep := config.DeploymentID("embed", "openai", "text-embedding-3-small")
	up, sent := g.attempt(routed, dep, body, 1)
	assert.Equal(t, "/v1/embeddings", headerOf(sent.GetRequestBody().GetResponse().GetHeaderMutation(), ":path"))
	out := sent.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	assert.Equal(t, "text-embedding-3-small", gjson.GetBytes(out, "model").Str)
	g.send(up, responseHeaders(":status", "200"))
	ans := g.send(up, bodyMsg(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`, true))
	assert.Equal(t, "embed", gjson.GetBytes(ans.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "model").Str)
	finish(up)
	g.send(x, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	finish(x)
	_, stored := g.records()
	require.Len(t, stored, 1)
	for _, rec := range stored {
		assert.EqualValues(t, 5, rec.PromptTokens)
		assert.Equal(t, money.Cost(5, money.PerDollar), rec.Cost)
		assert.False(t, rec.Estimated)
		assert.Equal(t, 200, rec.Status)
	}

	g = newRig(t, withKinds)
	_, routed = g.admitted(contract.PathCompletions, `{"model":"instruct","prompt":"hi","n":2}`)
	fwd := routed.GetRequestBody().GetResponse().GetBodyMutation().GetBody()
	assert.EqualValues(t, DefaultCompletionTokens, gjson.GetBytes(fwd, "max_tokens").Int(), "the held limit is sent")
	assert.Equal(t, []money.Nanos{money.Add(money.Cost(int64(2+inputAllowance), money.PerDollar), money.Cost(2*DefaultCompletionTokens, 2*money.PerDollar))},
		g.balance.holds)

	g = newRig(t, withKinds)
	_, routed = g.admitted(contract.PathRerank, `{"model":"rerank-units","query":"q","documents":["a","b"]}`)
	assert.Equal(t, []money.Nanos{2 * money.PerDollar}, g.balance.holds, "one search unit at $2")
	up, _ = g.attempt(routed, config.DeploymentID("rerank-units", "openai", "rerank-v3.5"), `{"model":"rerank-units","query":"q","documents":["a","b"]}`, 1)
	g.send(up, responseHeaders(":status", "200"))
	g.send(up, bodyMsg(`{"id":"r","results":[{"index":1,"relevance_score":0.9}],"meta":{"billed_units":{"search_units":1}}}`, true))
	finish(up)
	recs, _ := g.records()
	require.Len(t, recs, 1)
	assert.Equal(t, 2*money.PerDollar, recs[0].Cost)

	g = newRig(t, withKinds)
	x = g.open(contract.StepRouter)
	g.send(x, requestHeaders(contract.PathEmbeddings, "POST", false))
	status, e := errorOf(t, g.send(x, requestBody(`{"model":"gpt-4o-mini","input":"x"}`)))
	finish(x)
	assert.Equal(t, 400, status)
	assert.Equal(t, "invalid_model", e.Code)
	assert.Empty(t, g.balance.holds, "a refusal holds nothing")
}
