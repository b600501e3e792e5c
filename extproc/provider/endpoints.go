package provider

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/config"
)

// The endpoints other than chat (embeddings, legacy completions,
// moderations, rerank) go to OpenAI-type servers in OpenAI's own wire
// format, the body passing through with the deployment's model name; an
// embedding request to Gemini is translated to batchEmbedContents, to
// Bedrock to its model family's InvokeModel body, to Vertex to predict
// (vertex_embeddings.go), and its answer back. Their answers are metered from the provider's usage, or,
// where a provider reports none (OpenAI's moderations, Gemini's
// embeddings), estimated from the request's input.

// Endpoint names an endpoint family, the last part of its path.
type Endpoint string

// The endpoint families besides chat.
const (
	Embeddings  Endpoint = "embeddings"
	Completions Endpoint = "completions"
	Moderations Endpoint = "moderations"
	Rerank      Endpoint = "rerank"
)

// EndpointUpstream builds the request of an endpoint family for the
// deployment t, and the meter of its answer. req.Body is the client's
// validated body (a completion's with its held max_tokens).
func EndpointUpstream(ep Endpoint, req *Request, t Target) (Upstream, Response, error) {
	if t.Provider.Type == config.TypeGemini && ep == Embeddings {
		return geminiEmbeddings(req, t)
	}
	if t.Provider.Type == config.TypeBedrock && ep == Embeddings {
		return bedrockEmbeddings(req, t)
	}
	if t.Provider.Type == config.TypeVertex && ep == Embeddings {
		v, ok := adapters[config.TypeVertex].(vertex)
		if !ok {
			return Upstream{}, nil, fmt.Errorf("provider %s: no vertex adapter", t.Provider.Name)
		}
		return v.embeddings(req, t)
	}
	if ep == Rerank && t.Provider.RerankAPI == config.RerankVoyage {
		return voyageRerank(req, t)
	}
	body, err := sjson.SetBytes(req.Body, "model", t.Deployment.Model)
	if err != nil {
		return Upstream{}, nil, fmt.Errorf("rewrite model: %w", err)
	}
	asked := false
	if ep == Completions {
		if body, asked, err = streamUsage(body, req, t.Provider); err != nil {
			return Upstream{}, nil, err
		}
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{Authority: authority, Body: body, Headers: []Header{{"content-type", "application/json"}}}
	switch t.Provider.Type {
	case config.TypeAzure:
		version := t.Provider.APIVersion
		if version == "" {
			version = config.DefaultAzureVersion
		}
		up.Path = path + "/openai/deployments/" + url.PathEscape(t.Deployment.Model) + "/" + string(ep) + "?api-version=" + url.QueryEscape(version)
		if k := t.Provider.APIKey.Reveal(); k != "" {
			up.Headers = append(up.Headers, Header{"api-key", k})
		}
	case config.TypeOpenAI, config.TypeDemo:
		up.Path = path + "/" + string(ep)
		if k := t.Provider.APIKey.Reveal(); k != "" {
			up.Headers = append(up.Headers, Header{"authorization", "Bearer " + k})
		}
	default:
		return Upstream{}, nil, fmt.Errorf("provider %s: a %s provider serves no %s", t.Provider.Name, t.Provider.Type, ep)
	}
	if ep == Completions {
		r := newOpenAIResponse(req, t.Model.ID)
		r.clientUsage = !asked
		r.azure = t.Provider.Type == config.TypeAzure
		return up, r, nil
	}
	return up, &jsonAnswer{ep: ep, model: t.Model.ID, estimate: EstimateTokens(InputText(ep, req.Body))}, nil
}

// InputText is the text of an endpoint request's input, as one string,
// for estimates: the inputs of an embedding or moderation request, a
// completion's prompts, a rerank's query and documents. A token array
// counts a token a number.
func InputText(ep Endpoint, body []byte) string {
	var b strings.Builder
	add := func(v gjson.Result) {
		v.ForEach(func(_, item gjson.Result) bool {
			switch {
			case item.Type == gjson.String:
				b.WriteString(item.Str)
				b.WriteByte('\n')
			case item.Type == gjson.Number:
				b.WriteString("0 ")
			case item.IsArray():
				b.WriteString(strings.Repeat("0 ", int(item.Get("#").Int())))
			case item.IsObject():
				b.WriteString(item.Get("text").String())
				b.WriteByte('\n')
			}
			return true
		})
	}
	switch ep {
	case Embeddings, Moderations:
		add(arrayOf(gjson.GetBytes(body, "input")))
	case Completions:
		add(arrayOf(gjson.GetBytes(body, "prompt")))
	case Rerank:
		b.WriteString(gjson.GetBytes(body, "query").String())
		b.WriteByte('\n')
		add(gjson.GetBytes(body, "documents"))
	}
	return b.String()
}

// arrayOf is v as an array's items: a string is one item; a token array
// (of numbers) one item too.
func arrayOf(v gjson.Result) gjson.Result {
	if v.IsArray() {
		first := v.Get("0")
		if first.Type == gjson.Number {
			return gjson.Parse("[" + v.Raw + "]")
		}
		return v
	}
	return gjson.Parse("[" + v.Raw + "]")
}

// jsonAnswer meters a whole JSON answer (embeddings, moderations, rerank)
// and names the client's model in it. It takes the answer in pieces and
// hands it back whole at its end: the proxy streams it to the upstream
// step (a batch of embeddings passes what Envoy buffers).
type jsonAnswer struct {
	ep       Endpoint
	model    string
	estimate int64 // the input's estimated tokens, for a provider that reports none
	fail     *failure
	buf      []byte
	usage    Usage
	done     bool
	bad      bool
}

// MaxAnswer bounds a whole answer held to be metered and handed back in
// one message (within the gRPC message limit): 2,048 embeddings of 1,536
// floats as JSON text pass it, as base64 (the OpenAI SDKs' default) a
// quarter of that size does not come near.
const MaxAnswer = 32 << 20

// ErrAnswerTooLarge is a whole answer past MaxAnswer: the client gets 502
// with a message that says so.
var ErrAnswerTooLarge = fmt.Errorf("%w: the answer is larger than %d MiB", ErrUntranslatable, MaxAnswer>>20)

func (a *jsonAnswer) Status(status int) int {
	if status >= 400 {
		a.fail = &failure{status: status}
	}
	return clientStatus(status)
}

func (a *jsonAnswer) Body(piece []byte, end bool) ([]byte, error) {
	if a.fail != nil {
		return a.fail.body(piece, end), nil
	}
	if len(a.buf)+len(piece) > MaxAnswer {
		a.bad, a.buf = true, nil
		return nil, ErrAnswerTooLarge
	}
	whole := piece
	if !end || len(a.buf) > 0 {
		a.buf = append(a.buf, piece...)
		whole = a.buf
	}
	if !end {
		return nil, nil
	}
	if !gjson.ValidBytes(whole) || !gjson.ParseBytes(whole).IsObject() {
		a.bad = true
		return nil, ErrUntranslatable
	}
	a.usage = answerUsage(a.ep, whole, a.estimate)
	a.done = true
	if named, ok := withModel(whole, a.model); ok {
		return named, nil
	}
	return whole, nil
}

// answerUsage reads the usage an answer reports: the prompt tokens of an
// embedding, the tokens and search units of a rerank (Cohere's
// meta.billed_units, or usage.total_tokens); none for a moderation, whose
// input is then estimated.
func answerUsage(ep Endpoint, body []byte, estimate int64) Usage {
	switch ep {
	case Embeddings:
		// OpenAI's prompt_tokens; Voyage and some servers give only the
		// total, which for embeddings is the same count.
		for _, path := range []string{"usage.prompt_tokens", "usage.total_tokens"} {
			if p := gjson.GetBytes(body, path); p.Type == gjson.Number {
				return Usage{PromptTokens: p.Int(), Reported: true}
			}
		}
	case Rerank:
		u := Usage{}
		if n := gjson.GetBytes(body, "meta.billed_units.search_units"); n.Type == gjson.Number {
			u.SearchUnits, u.Reported = n.Int(), true
		}
		for _, path := range []string{"usage.total_tokens", "meta.billed_units.input_tokens", "usage.prompt_tokens"} {
			if n := gjson.GetBytes(body, path); n.Type == gjson.Number {
				u.PromptTokens, u.Reported = n.Int(), true
				break
			}
		}
		if u.Reported {
			return u
		}
	}
	return Usage{PromptTokens: estimate}
}

func (a *jsonAnswer) Usage() Usage       { return a.usage }
func (a *jsonAnswer) Completion() string { return "" }
func (a *jsonAnswer) Failed() bool       { return a.bad }
func (a *jsonAnswer) Completed() bool    { return a.done && a.fail == nil && !a.bad }

// geminiEmbeddings sends an embedding request to Gemini's
// batchEmbedContents: each input a request of one text part,
// dimensions as outputDimensionality. Gemini embeds text only.
func geminiEmbeddings(req *Request, t Target) (Upstream, Response, error) {
	model := strings.TrimPrefix(t.Deployment.Model, "models/")
	input := arrayOf(gjson.GetBytes(req.Body, "input"))
	if n := input.Get("#").Int(); n > GeminiMaxEmbeddings {
		return Upstream{}, nil, tooManyInputs{n}
	}
	var reqs []map[string]any
	var err error
	input.ForEach(func(_, item gjson.Result) bool {
		if item.Type != gjson.String {
			err = errTextOnly
			return false
		}
		r := map[string]any{"model": "models/" + model, "content": map[string]any{"parts": []map[string]string{{"text": item.Str}}}}
		if d := gjson.GetBytes(req.Body, "dimensions"); d.Type == gjson.Number {
			r["outputDimensionality"] = d.Int()
		}
		reqs = append(reqs, r)
		return true
	})
	if err != nil {
		return Upstream{}, nil, err
	}
	body, err := json.Marshal(map[string]any{"requests": reqs})
	if err != nil {
		return Upstream{}, nil, err
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{Path: path + "/v1beta/models/" + url.PathEscape(model) + ":batchEmbedContents", Authority: authority,
		Body: body, Headers: []Header{{"content-type", "application/json"}}}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"x-goog-api-key", k})
	}
	return up, &geminiEmbeddingAnswer{jsonAnswer: jsonAnswer{ep: Embeddings, model: t.Model.ID,
		estimate: EstimateTokens(InputText(Embeddings, req.Body))},
		base64: gjson.GetBytes(req.Body, "encoding_format").Str == "base64"}, nil
}

// GeminiMaxEmbeddings is the most inputs Gemini's batchEmbedContents
// takes in one request.
const GeminiMaxEmbeddings = 100

// tooManyInputs refuses a batch past GeminiMaxEmbeddings, naming it.
type tooManyInputs struct{ n int64 }

func (e tooManyInputs) Error() string {
	return fmt.Sprintf("This model's provider (gemini) embeds at most %d inputs a request; this one has %d: send them in smaller batches.", GeminiMaxEmbeddings, e.n)
}
func (tooManyInputs) Unwrap() error { return ErrUnsupportedRequest }

// errTextOnly refuses token-array inputs to Gemini.
var errTextOnly = textInputOnly{}

type textInputOnly struct{}

func (textInputOnly) Error() string {
	return "This model's provider (gemini) embeds text only: send the input as strings, not token arrays."
}
func (textInputOnly) Unwrap() error { return ErrUnsupportedRequest }

// geminiEmbeddingAnswer translates batchEmbedContents' answer to OpenAI's
// embedding list; Gemini reports no tokens, so the input is estimated.
type geminiEmbeddingAnswer struct {
	jsonAnswer
	base64 bool
}

func (a *geminiEmbeddingAnswer) Body(piece []byte, end bool) ([]byte, error) {
	out, err := a.jsonAnswer.Body(piece, end)
	if err != nil || !end || a.fail != nil {
		return out, err
	}
	embs := gjson.GetBytes(out, "embeddings")
	if !embs.IsArray() {
		a.bad, a.done = true, false
		return nil, ErrUntranslatable
	}
	var vectors []gjson.Result
	embs.ForEach(func(_, e gjson.Result) bool { vectors = append(vectors, e.Get("values")); return true })
	a.usage = Usage{PromptTokens: a.estimate}
	return embeddingList(vectors, a.base64, a.model, a.estimate)
}

// embeddingList is OpenAI's answer to an embedding request made of a
// provider's vectors (JSON arrays of numbers), in base64 when asked, with
// the tokens billed as its usage.
func embeddingList(vectors []gjson.Result, base64 bool, model string, tokens int64) ([]byte, error) {
	type item struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"`
	}
	data := make([]item, 0, len(vectors))
	for i, v := range vectors {
		var vals []float64
		v.ForEach(func(_, x gjson.Result) bool { vals = append(vals, x.Float()); return true })
		it := item{Object: "embedding", Index: i, Embedding: vals}
		if base64 {
			it.Embedding = EncodeBase64Floats(vals)
		}
		data = append(data, it)
	}
	return json.Marshal(map[string]any{"object": "list", "data": data, "model": model,
		"usage": map[string]int64{"prompt_tokens": tokens, "total_tokens": tokens}})
}

// EncodeBase64Floats is an embedding as OpenAI's encoding_format base64
// gives it: the little-endian float32 bytes, in standard base64.
func EncodeBase64Floats(vals []float64) string {
	b := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(v)))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// voyageRerank sends a rerank request in Voyage AI's shape ({base_url}
// /rerank: string documents, top_k for top_n) and hands its answer back in
// Cohere's v2 shape, metered from usage.total_tokens.
func voyageRerank(req *Request, t Target) (Upstream, Response, error) {
	var docs []string
	gjson.GetBytes(req.Body, "documents").ForEach(func(_, d gjson.Result) bool {
		if d.IsObject() {
			d = d.Get("text")
		}
		docs = append(docs, d.Str)
		return true
	})
	v := map[string]any{"model": t.Deployment.Model, "query": gjson.GetBytes(req.Body, "query").Str, "documents": docs}
	if n := gjson.GetBytes(req.Body, "top_n"); n.Exists() && n.Type != gjson.Null {
		v["top_k"] = n.Int()
	}
	if r := gjson.GetBytes(req.Body, "return_documents"); r.Type == gjson.True {
		v["return_documents"] = true
	}
	body, err := json.Marshal(v)
	if err != nil {
		return Upstream{}, nil, err
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{Path: path + "/rerank", Authority: authority, Body: body, Headers: []Header{{"content-type", "application/json"}}}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"authorization", "Bearer " + k})
	}
	return up, &voyageAnswer{jsonAnswer: jsonAnswer{ep: Rerank, model: t.Model.ID,
		estimate: EstimateTokens(InputText(Rerank, req.Body))}}, nil
}

// voyageAnswer translates Voyage's rerank answer ({"data":[{"index",
// "relevance_score","document"}],"usage":{"total_tokens"}}) to Cohere's.
type voyageAnswer struct{ jsonAnswer }

func (a *voyageAnswer) Body(piece []byte, end bool) ([]byte, error) {
	out, err := a.jsonAnswer.Body(piece, end)
	if err != nil || !end || a.fail != nil {
		return out, err
	}
	data := gjson.GetBytes(out, "data")
	if !data.IsArray() {
		a.bad, a.done = true, false
		return nil, ErrUntranslatable
	}
	type result struct {
		Index    int64              `json:"index"`
		Score    float64            `json:"relevance_score"`
		Document *map[string]string `json:"document,omitempty"`
	}
	results := []result{}
	data.ForEach(func(_, d gjson.Result) bool {
		r := result{Index: d.Get("index").Int(), Score: d.Get("relevance_score").Float()}
		if doc := d.Get("document"); doc.Type == gjson.String {
			r.Document = &map[string]string{"text": doc.Str}
		}
		results = append(results, r)
		return true
	})
	total := a.usage.PromptTokens
	return json.Marshal(map[string]any{"id": "rerank-" + rand.Text(), "model": a.model,
		"results": results, "meta": map[string]any{"api_version": map[string]string{"version": "2"}},
		"usage": map[string]int64{"total_tokens": total}})
}
