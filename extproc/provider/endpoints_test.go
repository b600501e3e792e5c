package provider

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

func endpointFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "endpoints", name))
	require.NoError(t, err)
	return b
}

// answer feeds a whole answer to r in two pieces, as a proxy may.
func answer(t *testing.T, r Response, status int, body []byte) (int, []byte) {
	t.Helper()
	st := r.Status(status)
	first, err := r.Body(body[:len(body)/2], false)
	require.NoError(t, err)
	require.Empty(t, first, "a whole answer is held until its end")
	out, err := r.Body(body[len(body)/2:], true)
	require.NoError(t, err)
	return st, out
}

// Each endpoint goes to an OpenAI-type server at {base_url}/{endpoint}
// and to Azure's deployment path, with the deployment's model name and
// the provider's credential; the client's other fields pass as they are.
func TestEndpointRequestsGoToEachProvidersPath(t *testing.T) {
	body := []byte(`{"model":"public-model","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u1"}`)
	for _, tc := range []struct {
		typ, path string
		header    Header
	}{
		{config.TypeOpenAI, "/v1/embeddings", Header{"authorization", "Bearer sk-test-openai"}},
		{config.TypeAzure, "/openai/deployments/gpt-4o%20prod/embeddings?api-version=2024-10-21", Header{"api-key", "az-test-key"}},
	} {
		up, _, err := EndpointUpstream(Embeddings, &Request{Body: body}, testTarget(tc.typ))
		require.NoError(t, err, tc.typ)
		assert.Equal(t, tc.path, up.Path, tc.typ)
		assert.Contains(t, up.Headers, tc.header, tc.typ)
		assert.Equal(t, testTarget(tc.typ).Deployment.Model, gjson.GetBytes(up.Body, "model").Str)
		assert.JSONEq(t, `["a","b"]`, gjson.GetBytes(up.Body, "input").Raw)
		assert.Equal(t, "base64", gjson.GetBytes(up.Body, "encoding_format").Str)
		assert.EqualValues(t, 256, gjson.GetBytes(up.Body, "dimensions").Int())
	}
	for _, ep := range []Endpoint{Completions, Moderations, Rerank} {
		up, _, err := EndpointUpstream(ep, &Request{Body: []byte(`{"model":"m"}`)}, testTarget(config.TypeOpenAI))
		require.NoError(t, err)
		assert.Equal(t, "/v1/"+string(ep), up.Path)
	}
	_, _, err := EndpointUpstream(Rerank, &Request{Body: body}, testTarget(config.TypeAnthropic))
	assert.Error(t, err, "Anthropic serves none of them")
}

// A streamed completion asks for the usage chunk, which the client gets
// only if it asked; the answer names the client's model.
func TestACompletionIsMeteredFromItsUsage(t *testing.T) {
	up, r, err := EndpointUpstream(Completions, &Request{Body: []byte(`{"model":"public-model","prompt":"Say this is a test","stream":true,"max_tokens":7}`), Stream: true},
		testTarget(config.TypeOpenAI))
	require.NoError(t, err)
	assert.True(t, gjson.GetBytes(up.Body, "stream_options.include_usage").Bool())
	assert.EqualValues(t, 7, gjson.GetBytes(up.Body, "max_tokens").Int())
	r.Status(200)
	out, err := r.Body(endpointFixture(t, "openai_completion_stream.sse"), true)
	require.NoError(t, err)
	assert.NotContains(t, string(out), `"usage":{`, "the usage chunk the client did not ask for")
	assert.Contains(t, string(out), `"model":"public-model"`)
	assert.Contains(t, string(out), "data: [DONE]")
	assert.Equal(t, Usage{PromptTokens: 5, CompletionTokens: 6, Reported: true}, r.Usage())
	assert.Equal(t, "This is a test.", r.Completion())
	assert.True(t, r.Completed())

	_, r, err = EndpointUpstream(Completions, &Request{Body: []byte(`{"model":"public-model","prompt":"x"}`)}, testTarget(config.TypeOpenAI))
	require.NoError(t, err)
	_, out = answer(t, r, 200, endpointFixture(t, "openai_completion_response.json"))
	assert.Equal(t, "public-model", gjson.GetBytes(out, "model").Str)
	assert.Equal(t, "text_completion", gjson.GetBytes(out, "object").Str)
	assert.Equal(t, Usage{PromptTokens: 5, CompletionTokens: 7, Reported: true}, r.Usage())
}

// Whole answers are metered as each provider reports them: an embedding's
// prompt tokens; a rerank's search units (Cohere) or tokens (Jina); a
// moderation reports none, so its input is estimated.
func TestWholeEndpointAnswersAreMeteredAsReported(t *testing.T) {
	for _, tc := range []struct {
		ep      Endpoint
		body    string
		fixture string
		usage   Usage
	}{
		{Embeddings, `{"model":"m","input":"The food was delicious"}`, "openai_embeddings_response.json", Usage{PromptTokens: 8, Reported: true}},
		{Rerank, `{"model":"m","query":"q","documents":["a","b"]}`, "cohere_rerank_response.json", Usage{SearchUnits: 1, Reported: true}},
		{Rerank, `{"model":"m","query":"q","documents":["a","b"]}`, "jina_rerank_response.json", Usage{PromptTokens: 815, Reported: true}},
		{Moderations, `{"model":"m","input":"I want to kill them."}`, "openai_moderation_response.json",
			Usage{PromptTokens: EstimateTokens("I want to kill them.\n")}},
	} {
		_, r, err := EndpointUpstream(tc.ep, &Request{Body: []byte(tc.body)}, testTarget(config.TypeOpenAI))
		require.NoError(t, err)
		st, out := answer(t, r, 200, endpointFixture(t, tc.fixture))
		assert.Equal(t, 200, st)
		assert.Equal(t, tc.usage, r.Usage(), tc.fixture)
		assert.True(t, r.Completed(), tc.fixture)
		if gjson.GetBytes(out, "model").Exists() {
			assert.Equal(t, "public-model", gjson.GetBytes(out, "model").Str, "the client's model, %s", tc.fixture)
		}
		assert.Equal(t, gjson.GetBytes(endpointFixture(t, tc.fixture), "results").Raw, gjson.GetBytes(out, "results").Raw, tc.fixture)
	}
}

// A provider's error reaches the client in OpenAI's shape; an answer that
// is not JSON is untranslatable (the client gets 502), and none is billed
// as complete.
func TestEndpointErrorsAndBrokenAnswers(t *testing.T) {
	_, r, err := EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"m","input":"x"}`)}, testTarget(config.TypeOpenAI))
	require.NoError(t, err)
	st, out := answer(t, r, 400, []byte(`{"error":{"message":"'$.input' is invalid.","type":"invalid_request_error","param":null,"code":null}}`))
	assert.Equal(t, 400, st)
	assert.Equal(t, "'$.input' is invalid.", gjson.GetBytes(out, "error.message").Str)
	assert.False(t, r.Completed())

	_, r, err = EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"m","input":"x"}`)}, testTarget(config.TypeOpenAI))
	require.NoError(t, err)
	r.Status(200)
	_, err = r.Body([]byte(`<html>`), true)
	assert.ErrorIs(t, err, ErrUntranslatable)
	assert.False(t, r.Completed())
}

// An embedding request to Gemini goes to batchEmbedContents, one request
// an input, dimensions as outputDimensionality; its answer comes back as
// OpenAI's list, in base64 when asked (the little-endian float32 bytes the
// OpenAI SDKs decode), billed at the input's estimate (Gemini reports no
// tokens). Token arrays are refused: Gemini embeds text.
func TestGeminiEmbeddingsAreTranslatedBothWays(t *testing.T) {
	body := []byte(`{"model":"public-model","input":["What is the meaning of life?","How much wood?"],"dimensions":3,"encoding_format":"base64"}`)
	up, r, err := EndpointUpstream(Embeddings, &Request{Body: body}, testTarget(config.TypeGemini))
	require.NoError(t, err)
	assert.Equal(t, "/v1beta/models/gemini-2.5-flash:batchEmbedContents", up.Path)
	assert.Contains(t, up.Headers, Header{"x-goog-api-key", "gem-test-key"})
	assert.JSONEq(t, `{"requests":[
		{"model":"models/gemini-2.5-flash","content":{"parts":[{"text":"What is the meaning of life?"}]},"outputDimensionality":3},
		{"model":"models/gemini-2.5-flash","content":{"parts":[{"text":"How much wood?"}]},"outputDimensionality":3}]}`, string(up.Body))

	fixture := endpointFixture(t, "gemini_batch_embed_response.json")
	st, out := answer(t, r, 200, fixture)
	assert.Equal(t, 200, st)
	assert.Equal(t, "list", gjson.GetBytes(out, "object").Str)
	assert.Equal(t, "public-model", gjson.GetBytes(out, "model").Str)
	require.EqualValues(t, 2, gjson.GetBytes(out, "data.#").Int())
	for i := range 2 {
		assert.EqualValues(t, i, gjson.GetBytes(out, "data."+string(rune('0'+i))+".index").Int())
		raw, err := base64.StdEncoding.DecodeString(gjson.GetBytes(out, "data."+string(rune('0'+i))+".embedding").Str)
		require.NoError(t, err)
		want := gjson.GetBytes(fixture, "embeddings."+string(rune('0'+i))+".values").Array()
		require.Len(t, raw, 4*len(want))
		for j, w := range want {
			assert.InDelta(t, w.Float(), math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])), 1e-7)
		}
	}
	estimate := EstimateTokens("What is the meaning of life?\nHow much wood?\n")
	assert.Equal(t, Usage{PromptTokens: estimate}, r.Usage(), "estimated: Gemini reports no tokens")
	assert.EqualValues(t, estimate, gjson.GetBytes(out, "usage.prompt_tokens").Int())

	_, _, err = EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"m","input":[[1,2,3]]}`)}, testTarget(config.TypeGemini))
	assert.ErrorIs(t, err, ErrUnsupportedRequest)

	many := `["x"` + strings.Repeat(`,"x"`, GeminiMaxEmbeddings) + `]`
	_, _, err = EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"m","input":` + many + `}`)}, testTarget(config.TypeGemini))
	assert.ErrorIs(t, err, ErrUnsupportedRequest)
	assert.EqualError(t, err, "This model's provider (gemini) embeds at most 100 inputs a request; this one has 101: send them in smaller batches.")
}

// A whole answer past MaxAnswer is dropped, not held: the client gets a
// 502 saying so, and nothing is billed as complete.
func TestAnAnswerPastTheLimitIsRefusedNotHeld(t *testing.T) {
	_, r, err := EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"m","input":"x"}`)}, testTarget(config.TypeOpenAI))
	require.NoError(t, err)
	r.Status(200)
	piece := make([]byte, 1<<20)
	for range MaxAnswer >> 20 {
		out, err := r.Body(piece, false)
		require.NoError(t, err)
		require.Empty(t, out)
	}
	_, err = r.Body([]byte("}"), true)
	assert.ErrorIs(t, err, ErrAnswerTooLarge)
	assert.ErrorIs(t, err, ErrUntranslatable)
	assert.False(t, r.Completed())
	assert.Nil(t, r.(*jsonAnswer).buf, "what was held is let go")
}

// A rerank to a provider with rerank_api voyage goes in Voyage's shape
// (string documents, top_k) and comes back in Cohere's, metered from its
// total tokens; a Voyage embedding answer, which gives only total_tokens,
// is metered from it.
func TestVoyageRerankIsTranslatedBothWays(t *testing.T) {
	target := testTarget(config.TypeOpenAI)
	target.Provider.BaseURL, target.Provider.RerankAPI, target.Deployment.Model = "https://api.voyageai.com/v1", config.RerankVoyage, "rerank-2"
	up, r, err := EndpointUpstream(Rerank, &Request{Body: []byte(`{"model":"public-model","query":"sea","documents":["The Mediterranean diet emphasizes fish.",{"text":"Whales are large marine mammals."}],"top_n":2,"return_documents":true}`)}, target)
	require.NoError(t, err)
	assert.Equal(t, "/v1/rerank", up.Path)
	assert.JSONEq(t, `{"model":"rerank-2","query":"sea","documents":["The Mediterranean diet emphasizes fish.","Whales are large marine mammals."],"top_k":2,"return_documents":true}`, string(up.Body))
	st, out := answer(t, r, 200, endpointFixture(t, "voyage_rerank_response.json"))
	assert.Equal(t, 200, st)
	assert.Equal(t, "public-model", gjson.GetBytes(out, "model").Str)
	assert.JSONEq(t, `[{"index":1,"relevance_score":0.4375,"document":{"text":"Whales are large marine mammals."}},
		{"index":0,"relevance_score":0.421875,"document":{"text":"The Mediterranean diet emphasizes fish."}}]`, gjson.GetBytes(out, "results").Raw)
	assert.Equal(t, Usage{PromptTokens: 26, Reported: true}, r.Usage())
	assert.True(t, r.Completed())

	_, r, err = EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"m","input":"x"}`)}, target)
	require.NoError(t, err)
	answer(t, r, 200, []byte(`{"object":"list","data":[{"object":"embedding","embedding":[0.1],"index":0}],"model":"voyage-3","usage":{"total_tokens":10}}`))
	assert.Equal(t, Usage{PromptTokens: 10, Reported: true}, r.Usage())
}

// Embeddings on Bedrock go through InvokeModel, signed as Converse is, in
// each family's body: Titan one text a request (its tokens reported),
// Cohere up to 96 (estimated: it reports none); both answers come back as
// OpenAI's list. What a family cannot take is refused naming it.
func TestBedrockEmbeddingsAreSignedAndTranslatedBothWays(t *testing.T) {
	target := testTarget(config.TypeBedrock)
	target.Deployment.Model = "amazon.titan-embed-text-v2:0"
	up, r, err := EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"public-model","input":"The food was delicious","dimensions":256}`)}, target)
	require.NoError(t, err)
	assert.Equal(t, "/model/amazon.titan-embed-text-v2%3A0/invoke", up.Path)
	assert.JSONEq(t, `{"inputText":"The food was delicious","dimensions":256,"normalize":true}`, string(up.Body))
	auth := header(up, "authorization")
	assert.True(t, strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/"), auth)
	sum := sha256.Sum256(up.Body)
	assert.Equal(t, hex.EncodeToString(sum[:]), header(up, "x-amz-content-sha256"), "the signature covers this body")
	st, out := answer(t, r, 200, endpointFixture(t, "../bedrock/embed_titan_response.json"))
	assert.Equal(t, 200, st)
	assert.Equal(t, "public-model", gjson.GetBytes(out, "model").Str)
	assert.JSONEq(t, `[0.0171,-0.0489,0.0362]`, gjson.GetBytes(out, "data.0.embedding").Raw)
	assert.Equal(t, Usage{PromptTokens: 7, Reported: true}, r.Usage())

	target.Deployment.Model = "cohere.embed-english-v3"
	up, r, err = EndpointUpstream(Embeddings, &Request{Body: []byte(`{"model":"public-model","input":["hello","world"],"encoding_format":"base64"}`)}, target)
	require.NoError(t, err)
	assert.JSONEq(t, `{"texts":["hello","world"],"input_type":"search_document"}`, string(up.Body))
	_, out = answer(t, r, 200, endpointFixture(t, "../bedrock/embed_cohere_response.json"))
	require.EqualValues(t, 2, gjson.GetBytes(out, "data.#").Int())
	raw, err := base64.StdEncoding.DecodeString(gjson.GetBytes(out, "data.1.embedding").Str)
	require.NoError(t, err)
	assert.InDelta(t, 0.0628, math.Float32frombits(binary.LittleEndian.Uint32(raw[8:])), 1e-7)
	assert.Equal(t, Usage{PromptTokens: EstimateTokens("hello\nworld\n")}, r.Usage(), "Cohere reports no tokens")

	for model, body := range map[string]string{
		"amazon.titan-embed-text-v2:0": `{"model":"m","input":["a","b"]}`,
		"cohere.embed-english-v3":      `{"model":"m","input":"a","dimensions":8}`,
		"cohere.embed-multilingual-v3": `{"model":"m","input":[[1,2]]}`,
		"meta.llama3-8b-instruct-v1:0": `{"model":"m","input":"a"}`,
	} {
		target.Deployment.Model = model
		_, _, err := EndpointUpstream(Embeddings, &Request{Body: []byte(body)}, target)
		assert.ErrorIs(t, err, ErrUnsupportedRequest, "%s %s", model, body)
	}
}
