package mockllm

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode"
)

// The bounds of a rerank request: Cohere's 1,000 documents, and its
// default max_tokens_per_doc.
const (
	maxDocuments      = 1000
	defaultDocTokens  = 4096
	cohereChunkTokens = 500 // Cohere bills a query and document in chunks of this many tokens
	cohereSearchUnit  = 100 // and a search unit is this many chunks
)

// words are the distinct words of a text, lower-cased, without
// punctuation.
func words(text string) map[string]bool {
	out := map[string]bool{}
	for _, w := range strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) }) {
		out[strings.ToLower(w)] = true
	}
	return out
}

// relevance is the share of the query's words the document holds.
func relevance(query map[string]bool, doc string) float64 {
	if len(query) == 0 {
		return 0
	}
	found := 0
	for w := range words(doc) {
		if query[w] {
			found++
		}
	}
	return float64(found) / float64(len(query))
}

// rerankDocuments reads the documents: strings, or objects with a text;
// or says why the providers refuse them.
func rerankDocuments(v any) ([]string, string) {
	vs, ok := v.([]any)
	switch {
	case !ok || len(vs) == 0:
		return nil, "'documents' is required: an array of 1 to 1000 strings or objects with a text"
	case len(vs) > maxDocuments:
		return nil, fmt.Sprintf("'documents' holds %d documents, more than %d", len(vs), maxDocuments)
	}
	out := make([]string, len(vs))
	for i, e := range vs {
		s, ok := e.(string)
		if !ok {
			s, ok = object(e)["text"].(string)
		}
		if !ok {
			return nil, fmt.Sprintf("'documents[%d]' is neither a string nor an object with a text", i)
		}
		out[i] = s
	}
	return out, ""
}

// rerank answers a rerank request in Cohere's v2 shape, which Jina, vLLM
// and Infinity share: results sorted by relevance (the share of the
// query's words a document holds, ties in the documents' order), cut to
// top_n, each with its document when return_documents (by default on
// every path but Cohere's /v2/rerank, as Jina and vLLM do); meta with
// Cohere's billed search units (a document counts a chunk per 500 tokens
// of query and document, and a unit is 100 chunks); usage with the tokens
// of the query once per document and of the documents (Options.Usage's
// prompt, when set). Documents are cut at max_tokens_per_doc tokens (4096
// when absent) before they are scored and counted. A request without a
// query, without documents or with more than 1,000, or with top_n or
// max_tokens_per_doc below 1, is refused.
func (m *Mock) rerank(w http.ResponseWriter, req *Request, p Play) {
	b := req.Body
	query, _ := b["query"].(string)
	if query == "" {
		m.refuse(w, req.Format, "query", "'query' is required: a string that is not empty")
		return
	}
	docs, msg := rerankDocuments(b["documents"])
	if msg != "" {
		m.refuse(w, req.Format, "documents", msg)
		return
	}
	topN, ok := intField(b, "top_n", len(docs), 1, 1<<30)
	if !ok {
		m.refuse(w, req.Format, "top_n", fmt.Sprintf("Invalid value for 'top_n': %s. It must be an integer of at least 1.", mustJSON(b["top_n"])))
		return
	}
	perDoc, ok := intField(b, "max_tokens_per_doc", defaultDocTokens, 1, 1<<30)
	if !ok {
		m.refuse(w, req.Format, "max_tokens_per_doc", fmt.Sprintf("Invalid value for 'max_tokens_per_doc': %s. It must be an integer of at least 1.",
			mustJSON(b["max_tokens_per_doc"])))
		return
	}
	returnDocs := req.Path != "/v2/rerank"
	if v, ok := b["return_documents"].(bool); ok {
		returnDocs = v
	}
	qWords, qTokens := words(query), req.tokensOf(query)
	type scored struct {
		index int
		score float64
	}
	ranked := make([]scored, len(docs))
	total, chunks := 0, 0
	for i, d := range docs {
		d = cutRunes(d, 4*perDoc)
		ranked[i] = scored{i, relevance(qWords, d)}
		dTokens := req.tokensOf(d)
		total += qTokens + dTokens
		chunks += (qTokens + dTokens + cohereChunkTokens - 1) / cohereChunkTokens
	}
	sort.SliceStable(ranked, func(i, j int) bool { return ranked[i].score > ranked[j].score })
	results := make([]any, 0, min(topN, len(ranked)))
	for _, r := range ranked[:min(topN, len(ranked))] {
		res := map[string]any{"index": r.index, "relevance_score": r.score}
		if returnDocs {
			res["document"] = map[string]any{"text": docs[r.index]}
		}
		results = append(results, res)
	}
	if m.opt.Usage != nil {
		total = m.opt.Usage.Prompt
	}
	writeWhole(w, map[string]any{"id": "rerank-mock", "model": modelOf(req), "results": results,
		"meta": map[string]any{"api_version": map[string]any{"version": "2", "is_experimental": false},
			"billed_units": map[string]any{"search_units": (chunks + cohereSearchUnit - 1) / cohereSearchUnit}},
		"usage": map[string]any{"total_tokens": total}}, p)
}
