// Package mockllm is a deterministic LLM server: one http.Handler that
// speaks OpenAI's chat completions and Responses API, Azure OpenAI,
// Anthropic's Messages API, Gemini's generateContent and
// streamGenerateContent, Vertex AI's Gemini and Claude paths (behind
// a fake OAuth2 token endpoint) and Amazon Bedrock's Converse and
// ConverseStream (verifying its SigV4 signatures), whole and streamed, with tool calls and usage
// counted from the request's text and the answer. Beside conversations it
// answers embeddings (OpenAI's, Azure's, Gemini's embedContent and
// batchEmbedContents), OpenAI's legacy completions, moderations, and
// rerank in Cohere's v2 shape (which Jina, vLLM and Infinity share); the
// paths of each format are listed with its Format.
//
// It is the other end of the wire, not a part of Tollgate's routing: the
// demo provider (type: demo) is this handler served in process through
// Transport, and the end-to-end tests and the benchmarks serve it on a
// loopback listener in place of a real provider. It lives under internal/
// because both tollgate serve and the tests use it, and nothing outside
// this module should.
//
// The answer is the same for the same request: it names the last user
// message; when the request offers tools and its tool choice does not
// forbid them, it calls them instead (see Mock.ServeHTTP). It stops where
// the request's output limit says, as a model does, and is bounded
// whatever the request. An embedding is a unit vector drawn from a hash
// of its text (Embedding), DefaultDimensions long unless the request asks
// for another length; a moderation flags only ForbiddenWord; a rerank
// scores a document by the share of the query's words it holds. What the
// providers refuse (an empty input, dimensions below 1, no query…) is
// refused with their 400. Options fix the answer and usage and make the
// server misbehave as real providers do (error statuses, hangs, cut or
// malformed streams) for the tests.
package mockllm

import (
	"bytes"
	"crypto/rsa"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// Format is a provider's wire format.
type Format string

// The wire formats, told apart by the request's path.
const (
	// OpenAI is POST /v1/chat/completions, /v1/responses,
	// /v1/embeddings, /v1/completions (legacy) and /v1/moderations, and
	// rerank on /rerank, /v1/rerank and /v2/rerank (Cohere's, Jina's,
	// vLLM's and Infinity's paths), with Authorization: Bearer.
	OpenAI Format = "openai"
	// Azure is POST /openai/deployments/{deployment}/chat/completions,
	// …/embeddings, …/completions and …/moderations, each ?api-version=…,
	// with api-key; chat and completions answers carry Azure's
	// content-filter annotations.
	Azure Format = "azure"
	// Anthropic is POST /v1/messages with x-api-key and anthropic-version.
	Anthropic Format = "anthropic"
	// Gemini is POST /v1beta/models/{model}:generateContent,
	// :streamGenerateContent?alt=sse, :embedContent and
	// :batchEmbedContents, with x-goog-api-key.
	Gemini Format = "gemini"
	// Vertex is Vertex AI's paths (vertex.go), with a Bearer token of the
	// mock's token endpoint; its requests have the Format of their family
	// (Gemini, Anthropic) and Request.Vertex set.
	Vertex Format = "vertex"
	// Bedrock is POST /model/{modelId}/converse and /converse-stream
	// (answered in AWS's event-stream framing), signed with SigV4
	// (Options.AWS) or with a Bedrock API key (Authorization: Bearer).
	Bedrock Format = "bedrock"
)

// CredentialHeader is the header each format's credential travels in.
var CredentialHeader = map[Format]string{
	OpenAI: "Authorization", Azure: "Api-Key", Anthropic: "X-Api-Key", Gemini: "X-Goog-Api-Key", Vertex: "Authorization",
	Bedrock: "Authorization",
}

// MaxBodyBytes bounds a request body; a larger one is refused with 413.
const MaxBodyBytes = 32 << 20

// Usage is the tokens an answer reports, as OpenAI counts them: prompt
// tokens include cached ones (Anthropic reports a fifth of them as read
// from its cache), completion tokens include reasoning ones (Gemini
// reports a quarter of them as thoughts).
type Usage struct {
	Prompt, Completion int
}

// Options configure a Mock. The zero value serves every format, checks no
// credential, gives the deterministic answer and keeps nothing; the demo
// provider is that with a credential only Tollgate holds.
type Options struct {
	// Formats are the formats served; a request in another gets 404.
	// Empty means all.
	Formats []Format
	// Credentials, when set for a format, is the exact value its
	// CredentialHeader must carry ("Bearer sk-…" for OpenAI); a request
	// without it gets 401, before its body is read. A request on a path of
	// no format with a credential must carry one of them.
	Credentials map[Format]string
	// AWS, when set, are the keys a Bedrock request may be signed with
	// instead: its SigV4 signature is verified with AWS's signer, and a
	// wrong one gets Bedrock's 403.
	AWS *AWSCredentials
	// Log, when set, gets a line for each request refused for its
	// credential (never the credential itself).
	Log *slog.Logger
	// Answer, when set, is the answer's text in its stream pieces instead
	// of the deterministic one.
	Answer []string
	// Usage, when set, is reported instead of the counted usage (its
	// Prompt as an embedding's prompt tokens and a rerank's total
	// tokens).
	Usage *Usage
	// Fault, when set, says how to misbehave on each request; it is called
	// once per request, as it arrives.
	Fault func(*Request) Fault
	// Release ends the HangAfter pause: the stream then runs to its end.
	Release <-chan struct{}
	// Left, when set, is called when a client goes away during a hang.
	Left func()
	// Gap paces a stream: the wait between two events (between two bytes
	// for Trickle, 20ms when zero).
	Gap time.Duration
	// Split writes every stream event in two writes, flushed apart, so
	// that events arrive cut at arbitrary places.
	Split bool
	// Gzip compresses the answers of requests that accept gzip, as
	// providers behind a CDN do.
	Gzip bool
	// Odd begins every stream with odd but legal events of its format: an
	// event {"usage":null}, a comment, {} and a usage-only event.
	Odd bool
	// Header is set on every answer, as a provider's own headers.
	Header http.Header
	// Record keeps every request (Requests, Problems) for the tests. The
	// demo provider keeps none.
	Record bool
	// BillBytes bills every byte of the prompt's text as one token (plus
	// OpenAI's 3 for priming the reply), the worst a byte-level tokenizer
	// can do, instead of about four bytes a token. Usage, when set, wins.
	BillBytes bool
	// Strict answers OpenAI-format requests as Mistral's API does: a body
	// with a field Mistral refuses (StrictRefused) gets its 422
	// extra_forbidden, and a stream ends with its usage on the last chunk
	// (the one with the finish reason), unasked, instead of a usage-only
	// chunk.
	Strict bool
	// VertexAccounts are the service accounts (client_email → public key)
	// whose signed JWTs the mock's token endpoint exchanges for access
	// tokens, which its Vertex paths then require (see vertex.go). Empty:
	// no token endpoint, and Vertex paths check no credential.
	VertexAccounts map[string]*rsa.PublicKey
}

// StrictRefused are the OpenAI fields a Strict mock refuses, as Mistral's
// API does.
var StrictRefused = []string{"stream_options", "max_completion_tokens"}

// Request is a request as the mock received it.
type Request struct {
	Format Format
	Method string
	Path   string // escaped, without query
	Query  url.Values
	Header http.Header
	// Vertex is true on Vertex AI's paths.
	Vertex bool
	// Body is the JSON body, decoded (nil when it was not JSON).
	Body map[string]any

	billBytes bool // Options.BillBytes, for read
}

// Mock is the server. Its methods are safe for concurrent use.
type Mock struct {
	opt      Options
	done     chan struct{}
	doneOnce sync.Once

	mu       sync.Mutex
	requests []Request
	// vertexTokens are the access tokens the token endpoint issued.
	vertexTokens map[string]bool
	problems     []string
}

// New returns a Mock.
func New(opt Options) *Mock { return &Mock{opt: opt, done: make(chan struct{})} }

// Close ends every hang in progress and every one to come.
func (m *Mock) Close() { m.doneOnce.Do(func() { close(m.done) }) }

// Requests are the requests received so far (with Options.Record).
func (m *Mock) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.requests)
}

// Count is how many requests were received (with Options.Record).
func (m *Mock) Count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.requests)
}

// Problems are what a real provider would have refused so far (with
// Options.Record): a body that is not JSON, an unknown route, a missing
// version, a wrong credential.
func (m *Mock) Problems() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.problems)
}

func (m *Mock) problem(format string, args ...any) {
	if !m.opt.Record {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

func (m *Mock) record(r Request) {
	if !m.opt.Record {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.requests = append(m.requests, r)
}

// ServeHTTP answers one request in its format. A request whose tool
// choice forces tools (required, any, or a named one) calls them (only the
// named one); one that merely offers tools calls every offered tool unless
// its last message is a tool's result; otherwise the answer is text. The
// answer is cut at the request's output limit (max_completion_tokens or
// max_tokens, max_output_tokens, max_tokens, maxOutputTokens), as the mock
// counts tokens, and at most about 4,000 tokens whatever the limit; its
// finish reason then says so (length, incomplete, max_tokens, MAX_TOKENS)
// and its counted usage never exceeds the limit. Embeddings, legacy
// completions, moderations and rerank have their own answers (see
// embeddings, completions, moderations and rerank); faults apply to them
// as to a conversation (a stream's plays to a streamed completion, and
// Malformed to every whole answer).
func (m *Mock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.Query(), Header: r.Header.Clone(), billBytes: m.opt.BillBytes}
	if req.Path == VertexTokenPath && len(m.opt.VertexAccounts) > 0 {
		m.issueToken(w, r)
		return
	}
	var fam family
	req.Format, fam = route(req.Path)
	if req.Format == "" {
		req.Format, fam = vertexRoute(req.Path)
		req.Vertex = req.Format != ""
	}
	if req.Vertex && !m.vertexAuthorized(r) {
		m.record(req)
		writeError(w, req.Format, http.StatusUnauthorized, "Request had invalid authentication credentials.")
		return
	}
	if !req.Vertex && !m.authorized(r, req.Format) {
		m.record(req)
		writeError(w, req.Format, http.StatusUnauthorized, "invalid credential")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	if err != nil {
		m.problem("reading the body: %v", err)
		if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
			writeError(w, req.Format, http.StatusRequestEntityTooLarge, "the request body is too large")
		}
		return
	}
	if err := json.Unmarshal(raw, &req.Body); err != nil {
		m.problem("%s %s: body is not JSON: %v", r.Method, req.Path, err)
	}
	m.record(req)
	if req.Format == Bedrock && m.opt.AWS != nil && signed(r) {
		if err := m.opt.AWS.verifySigV4(r, raw, time.Now()); err != nil {
			m.problem("bedrock: signature refused: %v", err)
			w.Header().Set("X-Amzn-ErrorType", "InvalidSignatureException")
			writeError(w, Bedrock, http.StatusForbidden, bedrockSignatureMismatch)
			return
		}
	}
	for k, vs := range m.opt.Header {
		w.Header()[k] = vs
	}
	if field := m.strictRefusal(&req); field != "" {
		writeExtraForbidden(w, field, req.Body[field])
		return
	}
	if status, msg := m.refusal(r, &req, len(raw)); status != 0 {
		writeError(w, req.Format, status, msg)
		return
	}
	if req.Path == countTokensPath {
		// Anthropic's count: the prompt's tokens as an answer's usage
		// counts them (Options.Usage's, when set).
		n := tokens(read(&req).text) + 3
		if m.opt.Usage != nil {
			n = m.opt.Usage.Prompt
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(map[string]any{"input_tokens": n}))
		return
	}
	var fault Fault
	if m.opt.Fault != nil {
		fault = m.opt.Fault(&req)
	}
	if fault.Status != 0 {
		writeError(w, req.Format, fault.Status, fmt.Sprintf("mock failure %d", fault.Status))
		return
	}
	if fault.Play == HangHeaders {
		m.hang(r)
		return
	}
	w = m.wrap(w, r)
	if c, ok := w.(io.Closer); ok {
		defer c.Close()
	}
	switch fam {
	case embeddingsFamily:
		m.embeddings(w, &req, fault.Play)
	case completionsFamily:
		m.completions(w, r, &req, fault)
	case moderationsFamily:
		m.moderations(w, &req, fault.Play)
	case rerankFamily:
		m.rerank(w, &req, fault.Play)
	default:
		m.answer(w, r, &req, fault)
	}
}

// refusal is the status and message of a request a real provider would
// refuse, or 0.
func (m *Mock) refusal(r *http.Request, req *Request, size int) (int, string) {
	switch {
	case size > MaxBodyBytes:
		return http.StatusRequestEntityTooLarge, "the request body is too large"
	case r.Method != http.MethodPost || req.Format == "" || (!req.Vertex && !m.serves(req.Format)) || (req.Vertex && !m.serves(Vertex)):
		m.problem("unexpected request %s %s", r.Method, r.URL)
		return http.StatusNotFound, "no such route"
	case req.Format == Azure && req.Query.Get("api-version") == "":
		m.problem("azure: no api-version in %s", r.URL)
		return http.StatusNotFound, "no api-version"
	case req.Vertex:
		return m.vertexRefusal(req)
	case req.Format == Anthropic && r.Header.Get("Anthropic-Version") == "":
		m.problem("anthropic: no anthropic-version header")
		return http.StatusBadRequest, "anthropic-version header is required"
	case req.Format == Gemini && strings.HasSuffix(req.Path, ":streamGenerateContent") && req.Query.Get("alt") != "sse":
		m.problem("gemini: a stream without alt=sse")
		return http.StatusNotFound, "no alt=sse"
	}
	return 0, ""
}

// authorized reports whether r carries its format's credential
// (Options.Credentials), or, on a path of no format with one, any of them.
// A refusal is a problem, and logged.
func (m *Mock) authorized(r *http.Request, f Format) bool {
	if len(m.opt.Credentials) == 0 || (f == Bedrock && m.opt.AWS != nil && signed(r)) {
		return true // a signature is verified with the body
	}
	formats := []Format{f}
	if _, ok := m.opt.Credentials[f]; !ok {
		formats = slices.Sorted(maps.Keys(m.opt.Credentials))
	}
	for _, cf := range formats {
		got := r.Header.Get(CredentialHeader[cf])
		if subtle.ConstantTimeCompare([]byte(got), []byte(m.opt.Credentials[cf])) == 1 {
			return true
		}
	}
	m.problem("%s: credential header %s is %q", f, CredentialHeader[formats[0]], r.Header.Get(CredentialHeader[formats[0]]))
	if m.opt.Log != nil {
		m.opt.Log.Warn("mock provider: request refused without its credential", "method", r.Method, "path", r.URL.EscapedPath(),
			"remote_addr", r.RemoteAddr)
	}
	return false
}

func (m *Mock) serves(f Format) bool {
	return len(m.opt.Formats) == 0 || slices.Contains(m.opt.Formats, f)
}

// family is the kind of endpoint a path asks for, whatever its format.
type family string

// The endpoint families: chat is every conversation API (chat
// completions, Responses, Messages, generateContent); the others each have
// a file of their own.
const (
	chatFamily        family = "chat"
	embeddingsFamily  family = "embeddings"
	completionsFamily family = "completions"
	moderationsFamily family = "moderations"
	rerankFamily      family = "rerank"
)

// openAIPaths are OpenAI's paths (and the rerank paths of Cohere, Jina,
// vLLM and Infinity, served in OpenAI's format), each with its family.
var openAIPaths = map[string]family{
	"/v1/chat/completions": chatFamily, "/v1/responses": chatFamily,
	"/v1/embeddings": embeddingsFamily, "/v1/completions": completionsFamily, "/v1/moderations": moderationsFamily,
	"/rerank": rerankFamily, "/v1/rerank": rerankFamily, "/v2/rerank": rerankFamily,
}

// azureFamilies are the families of Azure's paths, by what follows
// /openai/deployments/{deployment}/.
var azureFamilies = map[string]family{
	"embeddings": embeddingsFamily, "completions": completionsFamily, "moderations": moderationsFamily,
}

// geminiFamilies are the families of Gemini's methods, by what follows
// /v1beta/models/{model}:.
var geminiFamilies = map[string]family{
	"generateContent": chatFamily, "streamGenerateContent": chatFamily,
	"embedContent": embeddingsFamily, "batchEmbedContents": embeddingsFamily,
}

// route tells the format and the family from the path; the format is ""
// for none.
func route(path string) (Format, family) {
	if fam, ok := openAIPaths[path]; ok {
		return OpenAI, fam
	}
	switch {
	case strings.HasPrefix(path, "/openai/deployments/") && strings.HasSuffix(path, "/chat/completions"):
		return Azure, chatFamily
	case strings.HasPrefix(path, "/openai/deployments/"):
		deployment, op, _ := strings.Cut(strings.TrimPrefix(path, "/openai/deployments/"), "/")
		if fam, ok := azureFamilies[op]; ok && deployment != "" {
			return Azure, fam
		}
	case strings.HasPrefix(path, "/model/") && (strings.HasSuffix(path, "/converse") || strings.HasSuffix(path, "/converse-stream")):
		if bedrockModel(path) != "" {
			return Bedrock, chatFamily
		}
	case strings.HasPrefix(path, "/model/") && strings.HasSuffix(path, "/invoke"):
		if bedrockModel(path) != "" {
			return Bedrock, embeddingsFamily // InvokeModel: the embedding models' (bedrock_embeddings.go)
		}
	case path == "/v1/messages" || path == countTokensPath:
		return Anthropic, chatFamily
	case strings.HasPrefix(path, "/v1beta/models/"):
		model, method, _ := strings.Cut(strings.TrimPrefix(path, "/v1beta/models/"), ":")
		if fam, ok := geminiFamilies[method]; ok && model != "" {
			return Gemini, fam
		}
	}
	return "", ""
}

// countTokensPath is Anthropic's POST /v1/messages/count_tokens.
const countTokensPath = "/v1/messages/count_tokens"

// hang waits until the client goes, or the mock closes.
func (m *Mock) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
		if m.opt.Left != nil {
			m.opt.Left()
		}
	case <-m.done:
	}
}

// writeError answers an error in the format's shape.
func writeError(w http.ResponseWriter, f Format, status int, msg string) {
	var body any
	switch f {
	case Azure:
		body = map[string]any{"error": map[string]any{"code": fmt.Sprint(status), "message": msg}}
	case Anthropic:
		body = map[string]any{"type": "error", "error": map[string]any{"type": "api_error", "message": msg}}
	case Gemini:
		body = map[string]any{"error": map[string]any{"code": status, "message": msg, "status": "UNAVAILABLE"}}
	case Bedrock:
		body = map[string]any{"message": msg}
	default:
		body = map[string]any{"error": map[string]any{"message": msg, "type": "server_error", "param": nil, "code": nil}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(mustJSON(body))
}

// refuse answers 400 as the format's provider answers a request it
// refuses for what it carries (OpenAI's invalid_request_error naming the
// parameter, which Azure answers too; Gemini's INVALID_ARGUMENT), and
// keeps it as a problem.
func (m *Mock) refuse(w http.ResponseWriter, f Format, param, msg string) {
	m.problem("%s: refused (%s): %s", f, param, msg)
	body := map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": param, "code": nil}}
	if f == Gemini {
		body = map[string]any{"error": map[string]any{"code": http.StatusBadRequest, "message": msg, "status": "INVALID_ARGUMENT"}}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(mustJSON(body))
}

// writeWhole writes an answer that is never streamed: as it is, or cut
// short of valid JSON when the play is Malformed (the other plays are a
// stream's).
func writeWhole(w http.ResponseWriter, whole any, p Play) {
	w.Header().Set("Content-Type", "application/json")
	b := mustJSON(whole)
	if p == Malformed {
		b = b[:len(b)/2]
	}
	_, _ = w.Write(b)
}

// mustJSON encodes what the mock builds itself: maps of strings, numbers,
// booleans and nested maps and slices, which always encode.
func mustJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`null`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// strictRefusal is the first field of a Strict mock's OpenAI-format
// request that Mistral refuses, kept as a problem, or "".
func (m *Mock) strictRefusal(req *Request) string {
	if !m.opt.Strict || req.Format != OpenAI {
		return ""
	}
	for _, f := range StrictRefused {
		if _, ok := req.Body[f]; ok {
			m.problem("strict: refused %s", f)
			return f
		}
	}
	return ""
}

// writeExtraForbidden answers as Mistral's API answers a field it does not
// know: 422 with a validation error's detail.
func writeExtraForbidden(w http.ResponseWriter, field string, input any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_, _ = w.Write(mustJSON(map[string]any{"detail": []any{map[string]any{
		"type": "extra_forbidden", "loc": []any{"body", field}, "msg": "Extra inputs are not permitted", "input": input}}}))
}
