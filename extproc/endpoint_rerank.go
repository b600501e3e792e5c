package extproc

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// rerankEndpoint is POST /v1/rerank in Cohere's v2 shape, which Cohere
// (base_url …/v2), Jina (…/v1), vLLM, Infinity and TEI's Cohere-compatible
// routes take at {base_url}/rerank. A model with a search_unit_price is
// held and billed by search units (Cohere's meta.billed_units), any other
// by tokens (usage.total_tokens).
var rerankEndpoint = passEndpoint(provider.Rerank, contract.PathRerank, checkRerank)

// MaxRerankDocuments is the most documents one rerank request may have
// (Cohere's limit).
const MaxRerankDocuments = 1000

// checkRerank validates a rerank request: a non-empty query, 1 to
// MaxRerankDocuments documents as strings or objects with a text, top_n
// and max_tokens_per_doc positive integers, return_documents a boolean.
// Its bound is the tokens of the query read beside each document (as
// token-priced rerankers count) and, for a model priced by search units,
// the units Cohere's rule gives with a byte a token.
func checkRerank(body []byte, cfg *config.Config) (validChat, *oaierror.Error) {
	root, cr, e := endpointRequest(body, cfg, config.KindRerank, false)
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	query := root.Get("query")
	if query.Type != gjson.String || query.Str == "" {
		return validChat{Asked: cr.Asked}, invalid("invalid_request", "query", "query must be a non-empty string.")
	}
	docs := root.Get("documents")
	if !docs.IsArray() || !docs.Get("0").Exists() {
		return validChat{Asked: cr.Asked}, invalid("invalid_request", "documents", "documents must be a non-empty array of strings or of objects with a text.")
	}
	var lengths []int64
	docs.ForEach(func(_, d gjson.Result) bool {
		text := d
		if d.IsObject() {
			text = d.Get("text")
		}
		switch {
		case len(lengths) >= MaxRerankDocuments:
			e = invalid("invalid_request", "documents", "documents may have at most %d items.", MaxRerankDocuments)
		case text.Type != gjson.String:
			e = invalid("invalid_request", "documents", "documents must be strings or objects with a text.")
		default:
			lengths = append(lengths, int64(len(text.Str)))
		}
		return e == nil
	})
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	if e := optional(root, map[string]func(gjson.Result) bool{
		"top_n": intIn(1, 1<<20), "max_tokens_per_doc": intIn(1, 1<<20), "return_documents": isBool,
	}, map[string]string{
		"top_n": "a positive integer", "max_tokens_per_doc": "a positive integer", "return_documents": "a boolean",
	}); e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	q := int64(len(query.Str))
	var chunks int64
	for _, n := range lengths {
		cr.PromptBound += q + n + inputAllowance
		chunks += max((q+n+inputAllowance+rerankChunk-1)/rerankChunk, 1)
	}
	cr.Units = (chunks + rerankUnitDocs - 1) / rerankUnitDocs
	return cr, nil
}

// Cohere's search units: a query with up to rerankUnitDocs documents is
// one; a document longer than rerankChunk tokens with the query counts
// once for each rerankChunk.
const (
	rerankChunk    = 500
	rerankUnitDocs = 100
)
