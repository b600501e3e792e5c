package provider

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

// Embeddings on Bedrock go through InvokeModel (POST {base_url}/model/
// {modelId}/invoke, signed as Converse is), in the model family's own
// body: Amazon Titan Text Embeddings takes one text a request
// ({"inputText", "dimensions"}) and reports its tokens
// (inputTextTokenCount); Cohere Embed takes up to 96 texts ({"texts",
// "input_type"}) and reports none, so it is billed the input's estimate.
// Both answers come back as OpenAI's embedding list.

// Bedrock's embedding batch limits.
const (
	bedrockTitanInputs  = 1
	bedrockCohereInputs = 96
)

func bedrockEmbeddings(req *Request, t Target) (Upstream, Response, error) {
	model := t.Deployment.Model
	titan := strings.Contains(model, "titan-embed")
	cohere := strings.Contains(model, "cohere.embed")
	if !titan && !cohere {
		return Upstream{}, nil, bedrockRefusal("This model's provider (bedrock) embeds with Amazon Titan Text Embeddings or Cohere Embed models only.")
	}
	var texts []string
	var err error
	arrayOf(gjson.GetBytes(req.Body, "input")).ForEach(func(_, item gjson.Result) bool {
		if item.Type != gjson.String {
			err = bedrockRefusal("This model's provider (bedrock) embeds text only: send the input as strings, not token arrays.")
			return false
		}
		texts = append(texts, item.Str)
		return true
	})
	if err != nil {
		return Upstream{}, nil, err
	}
	dims := gjson.GetBytes(req.Body, "dimensions")
	var body []byte
	switch {
	case titan && len(texts) > bedrockTitanInputs:
		return Upstream{}, nil, bedrockRefusal(fmt.Sprintf("Amazon Titan Text Embeddings on Bedrock embeds %d input a request; this one has %d: send them one at a time.", bedrockTitanInputs, len(texts)))
	case titan:
		v := map[string]any{"inputText": texts[0], "normalize": true}
		if dims.Exists() {
			v["dimensions"] = dims.Int()
		}
		body, err = json.Marshal(v)
	case len(texts) > bedrockCohereInputs:
		return Upstream{}, nil, bedrockRefusal(fmt.Sprintf("Cohere Embed on Bedrock embeds at most %d inputs a request; this one has %d: send them in smaller batches.", bedrockCohereInputs, len(texts)))
	case dims.Exists():
		return Upstream{}, nil, bedrockRefusal("Cohere Embed on Bedrock has fixed dimensions: leave out dimensions.")
	default:
		body, err = json.Marshal(map[string]any{"texts": texts, "input_type": "search_document"})
	}
	if err != nil {
		return Upstream{}, nil, err
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{Path: path + "/model/" + bedrockModelPath(model) + "/invoke", Authority: authority, Body: body,
		Headers: []Header{{"content-type", "application/json"}, {"accept", "application/json"}}}
	b, ok := adapters[config.TypeBedrock].(bedrock)
	if !ok {
		return Upstream{}, nil, fmt.Errorf("provider %s: no bedrock adapter", t.Provider.Name)
	}
	if err := b.authorize(&up, t.Provider); err != nil {
		return Upstream{}, nil, err
	}
	return up, &bedrockEmbeddingAnswer{jsonAnswer: jsonAnswer{ep: Embeddings, model: t.Model.ID,
		estimate: EstimateTokens(InputText(Embeddings, req.Body))},
		base64: gjson.GetBytes(req.Body, "encoding_format").Str == "base64"}, nil
}

// bedrockRefusal is a request Bedrock's embedding models cannot take,
// told to the client as a 400.
type bedrockRefusal string

func (e bedrockRefusal) Error() string { return string(e) }
func (bedrockRefusal) Unwrap() error   { return ErrUnsupportedRequest }

// bedrockEmbeddingAnswer translates Titan's ({"embedding",
// "inputTextTokenCount"}) or Cohere's ({"embeddings": [[…]]}) answer to
// OpenAI's embedding list.
type bedrockEmbeddingAnswer struct {
	jsonAnswer
	base64 bool
}

func (a *bedrockEmbeddingAnswer) Body(piece []byte, end bool) ([]byte, error) {
	out, err := a.jsonAnswer.Body(piece, end)
	if err != nil || !end || a.fail != nil {
		return out, err
	}
	var vectors []gjson.Result
	usage := Usage{PromptTokens: a.estimate}
	switch r := gjson.ParseBytes(out); {
	case r.Get("embedding").IsArray():
		vectors = []gjson.Result{r.Get("embedding")}
		if n := r.Get("inputTextTokenCount"); n.Type == gjson.Number {
			usage = Usage{PromptTokens: n.Int(), Reported: true}
		}
	case r.Get("embeddings").IsArray():
		vectors = r.Get("embeddings").Array()
	default:
		a.bad, a.done = true, false
		return nil, ErrUntranslatable
	}
	a.usage = usage
	return embeddingList(vectors, a.base64, a.model, usage.PromptTokens)
}
