// Package provider translates between OpenAI's chat-completions interface,
// which every client speaks, and each provider's own API. One file per
// provider; all behind Adapter.
package provider

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/tollgate/tollgate/config"
)

// Request is a client's chat-completion request, already validated by the
// router step.
type Request struct {
	// Body is the client's JSON body, in OpenAI's shape. Adapters must not
	// modify it in place.
	Body []byte
	// Stream is the client's "stream" flag.
	Stream bool
	// ClientUsage is true when the client itself set
	// stream_options.include_usage; otherwise the usage chunk Tollgate asks
	// for is stripped from the client's stream.
	ClientUsage bool

	// parsed is Body as a chat request, parsed by its first reader (the
	// translating adapters, the prompt estimate) and kept for the others;
	// parsedBody is the Body it was parsed from, parseErr its error.
	parsed     *openAIChatRequest
	parsedBody []byte
	parseErr   error
}

// chat is the body as a chat request, parsed once per body: an adapter
// and the prompt estimate of the same attempt share one parse.
func (r *Request) chat() (*openAIChatRequest, error) {
	if (r.parsed == nil && r.parseErr == nil) || !sameBody(r.parsedBody, r.Body) {
		r.parsed, r.parseErr = new(openAIChatRequest), nil
		if err := json.Unmarshal(r.Body, r.parsed); err != nil {
			r.parsed, r.parseErr = nil, err
		}
		r.parsedBody = r.Body
	}
	return r.parsed, r.parseErr
}

// sameBody reports whether a and b are the same bytes in memory.
func sameBody(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Target is the deployment Envoy picked for this attempt.
type Target struct {
	Model      *config.Model
	Deployment *config.Deployment
	Provider   *config.Provider
}

// Header is one header to set on the upstream request.
type Header struct{ Name, Value string }

// Upstream is the request as the provider must receive it.
type Upstream struct {
	// Path is the request's :path, with query (the base URL's path included).
	Path string
	// Authority is the provider's host[:port] (the :authority/Host header).
	Authority string
	// Headers are set on the request (credential, version, content-type).
	// The client's Authorization header is always removed.
	Headers []Header
	// Body is the translated body.
	Body []byte
}

// Usage is the token count of one response.
type Usage struct {
	PromptTokens     int64
	CompletionTokens int64
	// CachedTokens of the prompt were read from the provider's prompt
	// cache, CacheWriteTokens written to it (Anthropic); both are part of
	// PromptTokens and priced apart.
	CachedTokens, CacheWriteTokens int64
	// ReasoningTokens of the completion were spent reasoning (OpenAI's
	// reasoning_tokens, Gemini's thoughtsTokenCount).
	ReasoningTokens int64
	// SearchUnits are a rerank's billed search units (Cohere's
	// meta.billed_units), for models priced by them.
	SearchUnits int64
	// Reported is true when these are the provider's own counts; false means
	// the provider has not (yet) reported final ones, and Tollgate
	// estimates. While false, the counts may hold what the provider reported
	// so far (Anthropic's input tokens from message_start, Gemini's running
	// counts): a non-zero PromptTokens is then the provider's own.
	Reported bool
}

// Response translates one provider response into OpenAI's shape. It is
// stateful: one per attempt, fed in order.
type Response interface {
	// Status is called once with the provider's HTTP status and returns the
	// status to give the client (e.g. Anthropic's 529 becomes 503).
	Status(status int) int
	// Body translates the next piece of the provider's body (a piece may end
	// anywhere, even inside a line or a UTF-8 sequence) and returns the
	// bytes for the client, possibly none. end is true on the last piece.
	// For an error status the whole body is translated to an OpenAI-shaped
	// error at end. An error return means the provider sent something that
	// cannot be translated; the stream is then ended with an error event.
	// The bytes returned may be the Response's own buffer: they are valid
	// until the next call.
	Body(piece []byte, end bool) ([]byte, error)
	// Usage is the usage known so far.
	Usage() Usage
	// Completion is the text generated so far (content and tool-call
	// arguments), used to estimate tokens when Usage().Reported is false.
	Completion() string
	// Failed reports that the provider failed after the answer began: the
	// client got an error event instead of the rest of the answer.
	Failed() bool
	// Completed reports that the provider's answer is whole: its terminal
	// event (or, not streamed, the whole body) has been translated and
	// handed back for the client, without a failure. What happens to the
	// client after that does not change the outcome.
	Completed() bool
}

// ErrUntranslatable is returned by Response.Body for a non-streamed 2xx
// body that cannot be translated; the caller answers 502 instead.
var ErrUntranslatable = errors.New("provider: the provider's answer could not be translated")

// Adapter builds the upstream request for a deployment and a translator for
// its answer.
type Adapter interface {
	Translate(req *Request, t Target) (Upstream, Response, error)
}

// For returns the adapter for a provider type.
func For(providerType string) (Adapter, error) {
	a, ok := adapters[providerType]
	if !ok {
		return nil, fmt.Errorf("provider: no adapter for type %q", providerType)
	}
	return a, nil
}

// adapters maps config provider types to adapters; each provider's file
// registers itself in init.
var adapters = map[string]Adapter{}
