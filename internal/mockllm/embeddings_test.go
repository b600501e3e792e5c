package mockllm

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// floats are a JSON array of numbers as float32s.
func floats(t *testing.T, v gjson.Result) []float32 {
	t.Helper()
	var out []float32
	require.NoError(t, json.Unmarshal([]byte(v.Raw), &out), v.Raw)
	return out
}

func norm(v []float32) float64 {
	s := 0.0
	for _, f := range v {
		s += float64(f) * float64(f)
	}
	return math.Sqrt(s)
}

func TestEmbeddingsAreDeterministicUnitVectorsOfTheAskedLength(t *testing.T) {
	m := New(Options{})
	for _, path := range []string{"/v1/embeddings", "/openai/deployments/d/embeddings?api-version=2024-10-21"} {
		resp, body := post(t, m, path, `{"model":"text-embedding-3-small","input":["Weather in Paris?","Weather in Oslo?"]}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		assert.Equal(t, "list", gjson.Get(body, "object").String())
		assert.Equal(t, "text-embedding-3-small", gjson.Get(body, "model").String(), "the model as asked")
		a, b := floats(t, gjson.Get(body, "data.0.embedding")), floats(t, gjson.Get(body, "data.1.embedding"))
		assert.Len(t, a, DefaultDimensions)
		assert.InDelta(t, 1, norm(a), 1e-6)
		assert.InDelta(t, 1, norm(b), 1e-6)
		assert.NotEqual(t, a, b, "another text, another vector")
		assert.Equal(t, Embedding("Weather in Paris?", DefaultDimensions), a)
		assert.EqualValues(t, 1, gjson.Get(body, "data.1.index").Int())
		assert.EqualValues(t, 5+4, gjson.Get(body, "usage.prompt_tokens").Int(), "17 and 16 characters, four a token")
		assert.EqualValues(t, 5+4, gjson.Get(body, "usage.total_tokens").Int())

		_, again := post(t, m, path, `{"model":"text-embedding-3-small","input":"Weather in Paris?","dimensions":5}`)
		v := floats(t, gjson.Get(again, "data.0.embedding"))
		assert.Len(t, v, 5)
		assert.InDelta(t, 1, norm(v), 1e-6)
		assert.Equal(t, Embedding("Weather in Paris?", 5), v)
	}
}

func TestTokenArraysAreEmbeddedAndCountedByTheirLength(t *testing.T) {
	m := New(Options{})
	_, one := post(t, m, "/v1/embeddings", `{"model":"m","input":[1212,318,257,1332]}`)
	assert.EqualValues(t, 1, gjson.Get(one, "data.#").Int(), "one token array is one input: %s", one)
	assert.EqualValues(t, 4, gjson.Get(one, "usage.prompt_tokens").Int())

	_, two := post(t, m, "/v1/embeddings", `{"model":"m","input":[[1212,318,257,1332],[7]]}`)
	assert.EqualValues(t, 2, gjson.Get(two, "data.#").Int(), two)
	assert.EqualValues(t, 5, gjson.Get(two, "usage.prompt_tokens").Int())
	assert.Equal(t, gjson.Get(one, "data.0.embedding").Raw, gjson.Get(two, "data.0.embedding").Raw, "the same tokens, the same vector")
	assert.NotEqual(t, gjson.Get(two, "data.0.embedding").Raw, gjson.Get(two, "data.1.embedding").Raw)
}

func TestEmbeddingsCountAsTheMockCountsPrompts(t *testing.T) {
	_, body := post(t, New(Options{BillBytes: true}), "/v1/embeddings", `{"model":"m","input":"é日a"}`)
	assert.EqualValues(t, 6, gjson.Get(body, "usage.prompt_tokens").Int(), "a token a byte with BillBytes")
	_, body = post(t, New(Options{Usage: &Usage{Prompt: 42}}), "/v1/embeddings", `{"model":"m","input":"hi"}`)
	assert.EqualValues(t, 42, gjson.Get(body, "usage.prompt_tokens").Int(), "Options.Usage wins")
}

// TestBase64EmbeddingsDecodeAsThePythonSDKDoes: OpenAI's Python SDK asks
// for base64 and decodes it with numpy.frombuffer(base64.b64decode(s),
// dtype="float32"): little-endian float32s, which must be the float
// answer's numbers.
func TestBase64EmbeddingsDecodeAsThePythonSDKDoes(t *testing.T) {
	m := New(Options{})
	const req = `{"model":"m","input":["Weather in Paris?","b"],"dimensions":7%s}`
	_, plain := post(t, m, "/v1/embeddings", fmt.Sprintf(req, ""))
	_, encoded := post(t, m, "/v1/embeddings", fmt.Sprintf(req, `,"encoding_format":"base64"`))
	for i := range 2 {
		s := gjson.Get(encoded, fmt.Sprintf("data.%d.embedding", i))
		require.Equal(t, gjson.String, s.Type, encoded)
		raw, err := base64.StdEncoding.DecodeString(s.String())
		require.NoError(t, err)
		require.Len(t, raw, 7*4)
		want := floats(t, gjson.Get(plain, fmt.Sprintf("data.%d.embedding", i)))
		for j := range want {
			got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
			assert.InDelta(t, want[j], got, 1e-7*math.Abs(float64(want[j]))+1e-12, "component %d", j)
		}
	}
	assert.Equal(t, gjson.Get(plain, "usage").Raw, gjson.Get(encoded, "usage").Raw)
}

func TestGeminiEmbedsAsOpenAIDoesAndReportsNoUsage(t *testing.T) {
	m := New(Options{})
	_, openai := post(t, m, "/v1/embeddings", `{"model":"m","input":["What is the meaning of life?","How does the brain work?"],"dimensions":8}`)

	resp, one := post(t, m, "/v1beta/models/gemini-embedding-001:embedContent",
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"What is the meaning of life?"}]},"outputDimensionality":8}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, one)
	assert.Equal(t, floats(t, gjson.Get(openai, "data.0.embedding")), floats(t, gjson.Get(one, "embedding.values")))

	resp, batch := post(t, m, "/v1beta/models/gemini-embedding-001:batchEmbedContents", `{"requests":[`+
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"What is the meaning of life?"}]},"outputDimensionality":8,"taskType":"RETRIEVAL_QUERY"},`+
		`{"model":"models/gemini-embedding-001","content":{"parts":[{"text":"How does the brain work?"}]},"outputDimensionality":8}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, batch)
	for i := range 2 {
		assert.Equal(t, floats(t, gjson.Get(openai, fmt.Sprintf("data.%d.embedding", i))), floats(t, gjson.Get(batch, fmt.Sprintf("embeddings.%d.values", i))))
	}
	assert.False(t, gjson.Get(batch, "usageMetadata").Exists(), "Gemini's embeddings report no usage")
	assert.False(t, gjson.Get(one, "usageMetadata").Exists())

	_, short := post(t, m, "/v1beta/models/g:embedContent", `{"content":{"parts":[{"text":"x"}]}}`)
	assert.Len(t, floats(t, gjson.Get(short, "embedding.values")), DefaultDimensions)
}

func TestEmbeddingsRefuseWhatTheProvidersRefuse(t *testing.T) {
	many := make([]string, maxInputs+1)
	for i := range many {
		many[i] = "a"
	}
	manyJSON, _ := json.Marshal(many)
	manyRequests := make([]any, maxGeminiBatch+1)
	for i := range manyRequests {
		manyRequests[i] = map[string]any{"content": map[string]any{"parts": []any{map[string]any{"text": "a"}}}}
	}
	batchJSON, _ := json.Marshal(map[string]any{"requests": manyRequests})
	for _, tc := range []struct {
		name, path, body, param string
	}{
		{"no input", "/v1/embeddings", `{"model":"m"}`, "input"},
		{"an empty string", "/v1/embeddings", `{"model":"m","input":""}`, "input"},
		{"an empty array", "/v1/embeddings", `{"model":"m","input":[]}`, "input"},
		{"an empty string in the array", "/v1/embeddings", `{"model":"m","input":["a",""]}`, "input"},
		{"more than 2048 inputs", "/v1/embeddings", `{"model":"m","input":` + string(manyJSON) + `}`, "input"},
		{"strings and token arrays mixed", "/v1/embeddings", `{"model":"m","input":["a",[1,2]]}`, "input"},
		{"an empty token array", "/v1/embeddings", `{"model":"m","input":[[1],[]]}`, "input"},
		{"a negative token", "/v1/embeddings", `{"model":"m","input":[1,-2]}`, "input"},
		{"an object", "/v1/embeddings", `{"model":"m","input":{"text":"a"}}`, "input"},
		{"dimensions 0", "/v1/embeddings", `{"model":"m","input":"a","dimensions":0}`, "dimensions"},
		{"dimensions -1", "/v1/embeddings", `{"model":"m","input":"a","dimensions":-1}`, "dimensions"},
		{"dimensions 1.5", "/v1/embeddings", `{"model":"m","input":"a","dimensions":1.5}`, "dimensions"},
		{"an unknown encoding_format", "/v1/embeddings", `{"model":"m","input":"a","encoding_format":"int8"}`, "encoding_format"},
		{"azure, no input", "/openai/deployments/d/embeddings?api-version=1", `{}`, "input"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := New(Options{Record: true})
			resp, body := post(t, m, tc.path, tc.body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, "invalid_request_error", gjson.Get(body, "error.type").String(), body)
			assert.Equal(t, tc.param, gjson.Get(body, "error.param").String(), body)
			assert.NotEmpty(t, gjson.Get(body, "error.message").String())
			assert.Len(t, m.Problems(), 1, "a refusal is a problem")
		})
	}
	for _, tc := range []struct{ name, path, body string }{
		{"no content", "/v1beta/models/g:embedContent", `{}`},
		{"no text", "/v1beta/models/g:embedContent", `{"content":{"parts":[{"text":""}]}}`},
		{"outputDimensionality 0", "/v1beta/models/g:embedContent", `{"content":{"parts":[{"text":"a"}]},"outputDimensionality":0}`},
		{"no requests", "/v1beta/models/g:batchEmbedContents", `{"requests":[]}`},
		{"more than 100 requests", "/v1beta/models/g:batchEmbedContents", string(batchJSON)},
		{"another model", "/v1beta/models/g:batchEmbedContents", `{"requests":[{"model":"models/h","content":{"parts":[{"text":"a"}]}}]}`},
	} {
		t.Run("gemini, "+tc.name, func(t *testing.T) {
			resp, body := post(t, New(Options{}), tc.path, tc.body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, "INVALID_ARGUMENT", gjson.Get(body, "error.status").String(), body)
			assert.EqualValues(t, 400, gjson.Get(body, "error.code").Int())
		})
	}
}

func TestFaultsApplyToEmbeddings(t *testing.T) {
	m := New(Options{Fault: func(*Request) Fault { return Fault{Status: 503} }})
	resp, body := post(t, m, "/v1/embeddings", `{"model":"m","input":"a"}`)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, body)

	m = New(Options{Fault: func(*Request) Fault { return Fault{Play: Malformed} }})
	resp, body = post(t, m, "/v1beta/models/g:embedContent", `{"content":{"parts":[{"text":"a"}]}}`)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.False(t, json.Valid([]byte(body)), "a malformed answer is not JSON: %s", body)
}
