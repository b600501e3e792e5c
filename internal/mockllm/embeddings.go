package mockllm

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
)

// DefaultDimensions is the length of the mock's embeddings when the request
// asks for none (OpenAI's dimensions, Gemini's outputDimensionality): short,
// so that answers and tests stay small.
const DefaultDimensions = 16

// The bounds of an embeddings request: OpenAI's 2,048 inputs, Gemini's 100
// requests a batch, and 3,072 dimensions (the most any OpenAI or Gemini
// embedding model has).
const (
	maxInputs      = 2048
	maxGeminiBatch = 100
	maxDimensions  = 3072
)

// Embedding is the mock's embedding of a text: a unit vector (L2 norm 1)
// of dims float32s, drawn from a generator seeded with the FNV-1a hash of
// the text. Every format embeds the same text the same way.
func Embedding(text string, dims int) []float32 { return vector(embedItem{text: text}.seed(), dims) }

// embedItem is one input to embed: a text, or (when tokens is not nil) a
// token array.
type embedItem struct {
	text   string
	tokens []int
}

// seed is the FNV-1a hash of the text, or of 0xff (which no UTF-8 text
// holds) and the token ids, little-endian, four bytes each.
func (e embedItem) seed() uint64 {
	h := fnv.New64a()
	if e.tokens == nil {
		_, _ = h.Write([]byte(e.text))
		return h.Sum64()
	}
	buf := []byte{0xff}
	for _, t := range e.tokens {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(t))
	}
	_, _ = h.Write(buf)
	return h.Sum64()
}

// count is the item's prompt tokens: a text's as the mock counts them, a
// token array's length.
func (e embedItem) count(req *Request) int {
	if e.tokens != nil {
		return len(e.tokens)
	}
	return req.tokensOf(e.text)
}

// vector is a unit vector of dims components, each drawn uniformly from
// [-1, 1) by SplitMix64 from seed, then normalized.
func vector(seed uint64, dims int) []float32 {
	v := make([]float64, dims)
	sum := 0.0
	for i := range v {
		seed += 0x9e3779b97f4a7c15
		z := seed
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		v[i] = float64(z>>11)/(1<<53)*2 - 1
		sum += v[i] * v[i]
	}
	out := make([]float32, dims)
	norm := math.Sqrt(sum)
	if norm == 0 {
		out[0] = 1
		return out
	}
	for i := range v {
		out[i] = float32(v[i] / norm)
	}
	return out
}

// base64Floats is encoding_format base64: the vector's float32s,
// little-endian, in standard base64 (what OpenAI's SDKs decode with
// numpy.frombuffer(…, dtype="float32")).
func base64Floats(v []float32) string {
	buf := make([]byte, 0, 4*len(v))
	for _, f := range v {
		buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
	}
	return base64.StdEncoding.EncodeToString(buf)
}

// embeddingItems reads OpenAI's input: a string, an array of strings, one
// token array, or an array of token arrays; or says why OpenAI refuses it
// (missing, empty, an empty string, more than 2,048 inputs, mixed kinds).
func embeddingItems(v any) ([]embedItem, string) {
	const invalid = "'$.input' is invalid: "
	switch x := v.(type) {
	case nil:
		return nil, "'input' is a required property"
	case string:
		if x == "" {
			return nil, invalid + "it must not be an empty string"
		}
		return []embedItem{{text: x}}, ""
	case []any:
		if len(x) == 0 {
			return nil, invalid + "it must not be an empty array"
		}
		if toks, ok := tokenArray(x); ok {
			return []embedItem{{tokens: toks}}, ""
		}
		if len(x) > maxInputs {
			return nil, fmt.Sprintf(invalid+"it holds %d inputs, more than %d", len(x), maxInputs)
		}
		items := make([]embedItem, 0, len(x))
		_, texts := x[0].(string)
		for i, e := range x {
			s, isText := e.(string)
			toks, isTokens := tokenArray(e)
			switch {
			case isText != texts || (!isText && !isTokens):
				return nil, fmt.Sprintf(invalid+"input %d is neither a string nor a token array like the others", i)
			case isText && s == "":
				return nil, fmt.Sprintf(invalid+"input %d is an empty string", i)
			}
			items = append(items, embedItem{text: s, tokens: toks})
		}
		return items, ""
	}
	return nil, invalid + "it must be a string, an array of strings or an array of token arrays"
}

// embeddings answers an embeddings request: OpenAI's and Azure's
// {"object":"list","data":[…],"model","usage"}, or Gemini's, Bedrock's or
// Vertex's (see geminiEmbeddings, bedrockEmbeddings, vertexEmbeddings). Prompt tokens are the texts' tokens as the mock
// counts them and the token arrays' lengths (Options.Usage's prompt, when
// set).
func (m *Mock) embeddings(w http.ResponseWriter, req *Request, p Play) {
	switch {
	case req.Vertex:
		m.vertexEmbeddings(w, req, p)
		return
	case req.Format == Gemini:
		m.geminiEmbeddings(w, req, p)
		return
	case req.Format == Bedrock:
		m.bedrockEmbeddings(w, req, p)
		return
	}
	b := req.Body
	items, msg := embeddingItems(b["input"])
	if msg != "" {
		m.refuse(w, req.Format, "input", msg)
		return
	}
	dims, ok := intField(b, "dimensions", DefaultDimensions, 1, maxDimensions)
	if !ok {
		m.refuse(w, req.Format, "dimensions", fmt.Sprintf("Invalid value for 'dimensions': %s. It must be an integer from 1 to %d.",
			mustJSON(b["dimensions"]), maxDimensions))
		return
	}
	encoding := "float"
	if v, ok := b["encoding_format"]; ok && v != nil {
		if encoding, _ = v.(string); encoding != "float" && encoding != "base64" {
			m.refuse(w, req.Format, "encoding_format", fmt.Sprintf("Invalid value for 'encoding_format': %s. Supported values are: 'float' and 'base64'.",
				mustJSON(v)))
			return
		}
	}
	data := make([]any, len(items))
	prompt := 0
	for i, it := range items {
		var e any = vector(it.seed(), dims)
		if encoding == "base64" {
			e = base64Floats(e.([]float32))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": e}
		prompt += it.count(req)
	}
	if m.opt.Usage != nil {
		prompt = m.opt.Usage.Prompt
	}
	writeWhole(w, map[string]any{"object": "list", "data": data, "model": modelOf(req),
		"usage": map[string]any{"prompt_tokens": prompt, "total_tokens": prompt}}, p)
}

// geminiEmbeddings answers Gemini's :embedContent ({"embedding":
// {"values":[…]}}) and :batchEmbedContents ({"embeddings":[…]}, at most
// 100 requests, each naming the path's model if it names one). Like
// Gemini's, the answer reports no usage.
func (m *Mock) geminiEmbeddings(w http.ResponseWriter, req *Request, p Play) {
	model := modelOf(req)
	if strings.HasSuffix(req.Path, ":embedContent") {
		values, msg := geminiEmbed(req.Body, model, "EmbedContentRequest")
		if msg != "" {
			m.refuse(w, Gemini, "content", msg)
			return
		}
		writeWhole(w, map[string]any{"embedding": map[string]any{"values": values}}, p)
		return
	}
	reqs, _ := req.Body["requests"].([]any)
	switch {
	case len(reqs) == 0:
		m.refuse(w, Gemini, "requests", "* BatchEmbedContentsRequest.requests: must not be empty")
		return
	case len(reqs) > maxGeminiBatch:
		m.refuse(w, Gemini, "requests", fmt.Sprintf("* BatchEmbedContentsRequest.requests: at most %d requests can be in one batch", maxGeminiBatch))
		return
	}
	embeddings := make([]any, len(reqs))
	for i, r := range reqs {
		values, msg := geminiEmbed(object(r), model, fmt.Sprintf("BatchEmbedContentsRequest.requests[%d]", i))
		if msg != "" {
			m.refuse(w, Gemini, "requests", msg)
			return
		}
		embeddings[i] = map[string]any{"values": values}
	}
	writeWhole(w, map[string]any{"embeddings": embeddings}, p)
}

// geminiEmbed embeds one EmbedContentRequest (its parts' text), or says
// why Gemini refuses it; at names it in the message.
func geminiEmbed(b map[string]any, model, at string) ([]float32, string) {
	if name, ok := b["model"].(string); ok && name != "models/"+model {
		return nil, fmt.Sprintf("* %s.model: %q is not the model of the request's path, models/%s", at, name, model)
	}
	text := partsText(object(b["content"])["parts"])
	if text == "" {
		return nil, fmt.Sprintf("* %s.content: contents are required and must hold text", at)
	}
	dims, ok := intField(b, "outputDimensionality", DefaultDimensions, 1, maxDimensions)
	if !ok {
		return nil, fmt.Sprintf("* %s.output_dimensionality: must be an integer from 1 to %d", at, maxDimensions)
	}
	return Embedding(text, dims), ""
}
