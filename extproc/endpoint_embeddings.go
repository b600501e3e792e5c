package extproc

import (
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// embeddingsEndpoint is POST /v1/embeddings, in OpenAI's wire format: to
// OpenAI-type servers and Azure as it is, to Gemini, Bedrock and Vertex
// translated (batchEmbedContents, InvokeModel, predict). It is held and
// billed for its input only.
var embeddingsEndpoint = passEndpoint(provider.Embeddings, contract.PathEmbeddings, checkEmbeddings)

// MaxEmbeddingInputs is the most inputs one embedding request may have
// (OpenAI's own limit).
const MaxEmbeddingInputs = 2048

// checkEmbeddings validates an embedding request: input as a non-empty
// string, array of strings, token array or array of token arrays, of at
// most MaxEmbeddingInputs items; encoding_format float or base64;
// dimensions a positive integer; user a string.
func checkEmbeddings(body []byte, cfg *config.Config) (validChat, *oaierror.Error) {
	root, cr, e := endpointRequest(body, cfg, config.KindEmbedding, false)
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	_, bound, e := inputs(root.Get("input"), "input", MaxEmbeddingInputs, true)
	if e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	if e := optional(root, map[string]func(gjson.Result) bool{
		"encoding_format": func(v gjson.Result) bool { return v.Str == "float" || v.Str == "base64" },
		"dimensions":      intIn(1, 1<<16),
		"user":            isString,
	}, map[string]string{
		"encoding_format": `"float" or "base64"`,
		"dimensions":      "a positive integer",
		"user":            "a string",
	}); e != nil {
		return validChat{Asked: cr.Asked}, e
	}
	cr.PromptBound = bound
	return cr, nil
}
