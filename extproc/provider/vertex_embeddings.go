package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"
)

// Embeddings on Vertex AI go to the text embedding models' predict method
// (POST …/publishers/google/models/{model}:predict, Google's token as for
// chat): each input an instance {"content": text}; dimensions as
// parameters.outputDimensionality; parameters.autoTruncate false, so that
// an input past the model's length is refused, as OpenAI refuses it,
// rather than cut silently. The answer's predictions[].embeddings.values
// come back as OpenAI's embedding list, billed the sum of their
// statistics.token_count.

// Vertex's embedding batch limits: gemini-embedding models take one
// instance a request, the others (text-embedding-005,
// text-multilingual-embedding-002…) 250.
const (
	VertexGeminiEmbeddingInputs = 1
	VertexMaxEmbeddingInputs    = 250
)

// vertexRefusal is a request Vertex's embedding models cannot take, told
// to the client as a 400.
type vertexRefusal string

func (e vertexRefusal) Error() string { return string(e) }
func (vertexRefusal) Unwrap() error   { return ErrUnsupportedRequest }

// embeddings builds a predict request for an embedding model on Vertex.
func (v vertex) embeddings(req *Request, t Target) (Upstream, Response, error) {
	model := strings.TrimPrefix(t.Deployment.Model, "models/")
	limit := VertexMaxEmbeddingInputs
	if strings.HasPrefix(model, "gemini-embedding") {
		limit = VertexGeminiEmbeddingInputs
	}
	var instances []map[string]string
	var err error
	arrayOf(gjson.GetBytes(req.Body, "input")).ForEach(func(_, item gjson.Result) bool {
		if item.Type != gjson.String {
			err = vertexRefusal("This model's provider (vertex) embeds text only: send the input as strings, not token arrays.")
			return false
		}
		instances = append(instances, map[string]string{"content": item.Str})
		return true
	})
	if err != nil {
		return Upstream{}, nil, err
	}
	if len(instances) > limit {
		return Upstream{}, nil, vertexRefusal(fmt.Sprintf(
			"This model's provider (vertex) embeds at most %d input%s a request with %s; this one has %d: send them in smaller batches.",
			limit, plural(limit), model, len(instances)))
	}
	params := map[string]any{"autoTruncate": false}
	if d := gjson.GetBytes(req.Body, "dimensions"); d.Type == gjson.Number {
		params["outputDimensionality"] = d.Int()
	}
	body, err := json.Marshal(map[string]any{"instances": instances, "parameters": params})
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{Body: body}
	if err := v.route(&up, t.Provider, "google", model, ":predict"); err != nil {
		return Upstream{}, nil, err
	}
	return up, &vertexEmbeddingAnswer{jsonAnswer: jsonAnswer{ep: Embeddings, model: t.Model.ID,
		estimate: EstimateTokens(InputText(Embeddings, req.Body))},
		base64: gjson.GetBytes(req.Body, "encoding_format").Str == "base64"}, nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// vertexEmbeddingAnswer translates predict's answer ({"predictions":
// [{"embeddings": {"values", "statistics": {"token_count"}}}]}) to
// OpenAI's embedding list, billed the predictions' token counts (the
// input's estimate when one has none).
type vertexEmbeddingAnswer struct {
	jsonAnswer
	base64 bool
}

func (a *vertexEmbeddingAnswer) Body(piece []byte, end bool) ([]byte, error) {
	out, err := a.jsonAnswer.Body(piece, end)
	if err != nil || !end || a.fail != nil {
		return out, err
	}
	preds := gjson.GetBytes(out, "predictions")
	if !preds.IsArray() {
		a.bad, a.done = true, false
		return nil, ErrUntranslatable
	}
	var vectors []gjson.Result
	var tokens int64
	counted := true
	preds.ForEach(func(_, p gjson.Result) bool {
		vectors = append(vectors, p.Get("embeddings.values"))
		n := p.Get("embeddings.statistics.token_count")
		counted = counted && n.Type == gjson.Number
		tokens += n.Int()
		return true
	})
	for _, v := range vectors {
		if !v.IsArray() {
			a.bad, a.done = true, false
			return nil, ErrUntranslatable
		}
	}
	a.usage = Usage{PromptTokens: tokens, Reported: true}
	if !counted || len(vectors) == 0 {
		a.usage = Usage{PromptTokens: a.estimate}
	}
	return embeddingList(vectors, a.base64, a.model, a.usage.PromptTokens)
}
