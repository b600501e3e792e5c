package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

const rerankBody = `{"model":"rerank-v3.5","query":"capital of France","documents":["Berlin is in Germany.",` +
	`{"text":"Paris is the capital of France."},"The capital of Spain is Madrid.","France"]%s}`

func TestRerankSortsByTheShareOfQueryWordsOnEveryPath(t *testing.T) {
	m := New(Options{Record: true, Credentials: map[Format]string{OpenAI: "Bearer sk-1"}})
	for _, path := range []string{"/rerank", "/v1/rerank", "/v2/rerank"} {
		resp, body := post(t, m, path, strings.Replace(rerankBody, "%s", "", 1), "Authorization", "Bearer sk-1")
		require.Equal(t, http.StatusOK, resp.StatusCode, body)
		var idx []int64
		for _, r := range gjson.Get(body, "results").Array() {
			idx = append(idx, r.Get("index").Int())
		}
		assert.Equal(t, []int64{1, 2, 3, 0}, idx, "3/3, then 2/3, then 1/3 (France), then 0: %s", body)
		assert.InDelta(t, 1, gjson.Get(body, "results.0.relevance_score").Float(), 1e-9)
		assert.InDelta(t, 2.0/3, gjson.Get(body, "results.1.relevance_score").Float(), 1e-9)
		assert.Equal(t, "rerank-v3.5", gjson.Get(body, "model").String())
		assert.Equal(t, "2", gjson.Get(body, "meta.api_version.version").String())
		assert.EqualValues(t, 1, gjson.Get(body, "meta.billed_units.search_units").Int())
		// query 5 tokens (17 characters) four times; documents 6+8+8+2.
		assert.EqualValues(t, 4*5+6+8+8+2, gjson.Get(body, "usage.total_tokens").Int())
		assert.Equal(t, path != "/v2/rerank", gjson.Get(body, "results.0.document").Exists(),
			"documents come back by default on Jina's and vLLM's paths, not on Cohere's v2")

		resp, _ = post(t, m, path, strings.Replace(rerankBody, "%s", "", 1), "Authorization", "Bearer sk-2")
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "Bearer auth like OpenAI's")
	}
}

func TestRerankCutsToTopNAndReturnsDocumentsWhenAsked(t *testing.T) {
	m := New(Options{})
	_, body := post(t, m, "/v2/rerank", strings.Replace(rerankBody, "%s", `,"top_n":2,"return_documents":true`, 1))
	require.EqualValues(t, 2, gjson.Get(body, "results.#").Int(), body)
	assert.Equal(t, "Paris is the capital of France.", gjson.Get(body, "results.0.document.text").String())
	assert.Equal(t, "The capital of Spain is Madrid.", gjson.Get(body, "results.1.document.text").String())

	_, body = post(t, m, "/v1/rerank", strings.Replace(rerankBody, "%s", `,"top_n":10,"return_documents":false`, 1))
	assert.EqualValues(t, 4, gjson.Get(body, "results.#").Int(), "top_n past the documents: all of them")
	assert.False(t, gjson.Get(body, "results.0.document").Exists())

	_, body = post(t, m, "/v1/rerank", `{"model":"m","query":"a b","documents":["b","a","c"]}`)
	assert.Equal(t, `[0,1,2]`, gjson.Get(body, "results.#.index").Raw, "ties in the documents' order")
}

func TestRerankBillsSearchUnitsAsCohereDoes(t *testing.T) {
	m := New(Options{})
	docs := make([]string, 150)
	for i := range docs {
		docs[i] = "short"
	}
	docs[0] = strings.Repeat("long ", 500) // 2,500 characters: 625 tokens, and the query's
	raw, _ := json.Marshal(map[string]any{"model": "m", "query": "long", "documents": docs})
	_, body := post(t, m, "/v2/rerank", string(raw))
	// 149 documents of one chunk, one of two (626 tokens): 151 chunks, 2 units.
	assert.EqualValues(t, 2, gjson.Get(body, "meta.billed_units.search_units").Int(), body[:200])
	assert.EqualValues(t, 150*1+149*2+625, gjson.Get(body, "usage.total_tokens").Int())

	raw, _ = json.Marshal(map[string]any{"model": "m", "query": "long", "documents": docs, "max_tokens_per_doc": 100})
	_, body = post(t, m, "/v2/rerank", string(raw))
	assert.EqualValues(t, 150*1+149*2+100, gjson.Get(body, "usage.total_tokens").Int(), "a document cut at max_tokens_per_doc")
	assert.EqualValues(t, 2, gjson.Get(body, "meta.billed_units.search_units").Int(), "150 chunks")

	_, body = post(t, New(Options{Usage: &Usage{Prompt: 7}}), "/v1/rerank", `{"query":"a","documents":["a"]}`)
	assert.EqualValues(t, 7, gjson.Get(body, "usage.total_tokens").Int(), "Options.Usage wins")
}

func TestRerankRefusesWhatTheProvidersRefuse(t *testing.T) {
	docs := make([]string, maxDocuments+1)
	raw, _ := json.Marshal(map[string]any{"query": "q", "documents": docs})
	for _, tc := range []struct{ name, body, param string }{
		{"no query", `{"documents":["a"]}`, "query"},
		{"an empty query", `{"query":"","documents":["a"]}`, "query"},
		{"no documents", `{"query":"q"}`, "documents"},
		{"an empty array", `{"query":"q","documents":[]}`, "documents"},
		{"more than 1000 documents", string(raw), "documents"},
		{"a document without text", `{"query":"q","documents":[{"title":"a"}]}`, "documents"},
		{"top_n 0", `{"query":"q","documents":["a"],"top_n":0}`, "top_n"},
		{"max_tokens_per_doc 0", `{"query":"q","documents":["a"],"max_tokens_per_doc":0}`, "max_tokens_per_doc"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := post(t, New(Options{}), "/v1/rerank", tc.body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, body)
			assert.Equal(t, tc.param, gjson.Get(body, "error.param").String(), body)
		})
	}
}
