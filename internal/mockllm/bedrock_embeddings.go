package mockllm

import (
	"fmt"
	"net/http"
	"strings"
)

// bedrockEmbeddings answers Bedrock's InvokeModel for its embedding
// models, as their documented bodies go: Amazon Titan Text Embeddings
// ({"inputText", "dimensions" 256, 512 or 1024 (default), "normalize"} →
// {"embedding", "inputTextTokenCount"}) and Cohere Embed ({"texts" (1 to
// 96), "input_type"} → {"embeddings", "id", "response_type", "texts"}, no
// token count). Other models, and what those refuse, get Bedrock's 400
// ValidationException. The vectors are Embedding's.
func (m *Mock) bedrockEmbeddings(w http.ResponseWriter, req *Request, p Play) {
	model := bedrockModel(req.Path)
	b := req.Body
	refuse := func(msg string) {
		m.problem("bedrock: refused: %s", msg)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write(mustJSON(map[string]any{"message": msg}))
	}
	switch {
	case strings.Contains(model, "titan-embed"):
		text, _ := b["inputText"].(string)
		if text == "" {
			refuse("Malformed input request: #: required key [inputText] not found")
			return
		}
		dims := 1024
		if d, ok := b["dimensions"].(float64); ok {
			dims = int(d)
		}
		if dims != 256 && dims != 512 && dims != 1024 {
			refuse(fmt.Sprintf("Malformed input request: #/dimensions: %d is not a valid enum value", dims))
			return
		}
		tokens := embedItem{text: text}.count(req)
		if m.opt.Usage != nil {
			tokens = m.opt.Usage.Prompt
		}
		writeWhole(w, map[string]any{"embedding": Embedding(text, dims), "inputTextTokenCount": tokens}, p)
	case strings.Contains(model, "cohere.embed"):
		texts, _ := b["texts"].([]any)
		if len(texts) == 0 || len(texts) > 96 || b["input_type"] == nil {
			refuse("Malformed input request: texts must hold 1 to 96 strings, and input_type is required")
			return
		}
		out := make([]any, len(texts))
		names := make([]string, len(texts))
		for i, t := range texts {
			s, _ := t.(string)
			out[i], names[i] = Embedding(s, 1024), s
		}
		writeWhole(w, map[string]any{"embeddings": out, "id": "emb-" + fmt.Sprint(len(m.Requests())),
			"response_type": "embeddings_floats", "texts": names}, p)
	default:
		refuse("The provided model identifier is invalid.")
	}
}
