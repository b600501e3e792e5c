package provider

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/sse"
)

// This file holds what the translating adapters (Anthropic, Gemini) share:
// the Response that buffers or parses a provider's answer, and the writer of
// OpenAI-shaped completions and chunks.

// clock and ID source of the translating adapters, injected so that tests
// are deterministic.
type env struct {
	now   func() time.Time
	newID func() string
}

var defaultEnv = env{
	now:   time.Now,
	newID: func() string { return "chatcmpl-" + rand.Text() },
}

// upstreamURL splits a provider's base URL into the authority and the path
// prefix that every request path starts with.
func upstreamURL(p *config.Provider) (authority, path string, err error) {
	b, err := baseOf(p)
	if err != nil {
		return "", "", err
	}
	return b.host, strings.TrimRight(b.path, "/"), nil
}

// base is a provider's base URL read: its authority, its path, and the
// path of its chat completions.
type base struct {
	host, path, chatPath string
}

// bases keeps the base URLs read, by their text: a request reads its
// provider's without parsing it again. A configuration names a few; past
// maxBases (configurations reloaded with ever new ones) a base is read
// each time.
var (
	bases  sync.Map // string → *base
	nBases atomic.Int64
)

const maxBases = 1024

func baseOf(p *config.Provider) (*base, error) {
	if b, ok := bases.Load(p.BaseURL); ok {
		return b.(*base), nil
	}
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("provider %s: base_url: %w", p.Name, err)
	}
	b := &base{host: u.Host, path: u.Path, chatPath: u.Path + "/chat/completions"}
	if nBases.Load() < maxBases {
		if _, loaded := bases.LoadOrStore(p.BaseURL, b); !loaded {
			nBases.Add(1)
		}
	}
	return b, nil
}

// clientStatus is the status a client gets for a provider's status.
func clientStatus(status int) int {
	if status >= 400 {
		s, _ := UpstreamError(status, nil)
		return s
	}
	return status
}

// maxErrorBody caps how much of a provider's error body is kept.
const maxErrorBody = 1 << 20

// failure collects a provider's error body and translates it at its end.
type failure struct {
	status int
	buf    []byte
}

func (f *failure) body(piece []byte, end bool) []byte {
	if room := maxErrorBody - len(f.buf); room > 0 {
		f.buf = append(f.buf, piece[:min(len(piece), room)]...)
	}
	if !end {
		return nil
	}
	_, b := UpstreamError(f.status, f.buf)
	return b
}

// codec is one provider's translation of its answer into OpenAI's shapes,
// driven by translated.
type codec interface {
	// whole translates a complete non-streamed body.
	whole(s *streamState, body []byte) ([]byte, error)
	// event translates one stream event, appending to out; it sets s.done
	// when the stream is over for the client ([DONE] or an error event
	// written).
	event(s *streamState, out []byte, ev sse.Event) ([]byte, error)
	// end is called when the provider's stream ends before s.done.
	end(s *streamState, out []byte) []byte
}

// KeptBuffer is the most a stream's translator keeps of a buffer from one
// piece of the answer to the next. A piece larger than that (a burst of
// events read at once) is written into a buffer that goes with its answer,
// so that a stream waiting on its provider (for minutes, maybe) holds no
// more than a small one, however large its pieces were.
const KeptBuffer = 4 << 10

// reuse is b emptied for the next piece, or nil once it grew past
// KeptBuffer.
func reuse(b []byte) []byte {
	if cap(b) > KeptBuffer {
		return nil
	}
	return b[:0]
}

// translated is the Response of the translating adapters.
type translated struct {
	stream  bool
	fail    *failure
	buf     []byte
	parser  sse.Parser
	codec   codec
	state   streamState
	stopped bool   // an untranslatable event ended the stream
	out     []byte // the last piece's bytes for the client
}

// newTranslated starts the translation of one answer: id is the fallback
// for answers that do not name theirs; model (the id the client asked for)
// names every answer and chunk.
func newTranslated(req *Request, c codec, id, model string, e env) *translated {
	return &translated{
		stream: req.Stream,
		codec:  c,
		state: streamState{
			id: id, model: model, created: e.now().Unix(),
			clientUsage: req.ClientUsage, n: 1,
		},
	}
}

// Status keeps an error status, whose body is then translated by
// UpstreamError, and returns the client's status.
func (r *translated) Status(status int) int {
	if status >= 400 {
		r.fail = &failure{status: status}
	}
	return clientStatus(status)
}

// Usage is the provider's counts so far; Reported once they are final.
func (r *translated) Usage() Usage { return r.state.usage }

// Failed reports an error event sent in place of the rest of the answer.
func (r *translated) Failed() bool { return r.state.failed || r.stopped }

// Completed reports a whole answer: a stream closed with [DONE], or a
// non-streamed body translated.
func (r *translated) Completed() bool { return r.state.done && !r.Failed() && r.fail == nil }

// Completion is the text and tool-call arguments translated so far.
func (r *translated) Completion() string { return r.state.text.String() }

// Body translates the provider's answer. With an error return, the bytes
// returned are still for the client (what was translated before the
// failure); the stream then needs the caller's error event.
func (r *translated) Body(piece []byte, end bool) ([]byte, error) {
	if r.fail != nil {
		return r.fail.body(piece, end), nil
	}
	if !r.stream {
		r.buf = append(r.buf, piece...)
		if !end {
			return nil, nil
		}
		out, err := r.codec.whole(&r.state, r.buf)
		if err != nil {
			r.stopped = true
			return nil, fmt.Errorf("%w: %w", ErrUntranslatable, err)
		}
		r.state.done = true
		return out, nil
	}
	if r.state.done || r.stopped {
		return nil, nil
	}
	r.parser.Feed(piece)
	// The client's bytes are written into the translator's own buffer,
	// reused by every piece (valid until the next call, as Body says).
	out := r.out[:0]
	defer func() { r.out = reuse(out) }()
	var err error
	for !r.state.done {
		ev, ok := r.parser.Next()
		if !ok {
			break
		}
		if out, err = r.event(out, ev); err != nil {
			return out, err
		}
	}
	if end && !r.state.done {
		if ev, ok := r.parser.Finish(); ok {
			if out, err = r.event(out, ev); err != nil {
				return out, err
			}
		}
		if !r.state.done {
			out = r.codec.end(&r.state, out)
			r.state.done = true
		}
	}
	return out, nil
}

func (r *translated) event(out []byte, ev sse.Event) ([]byte, error) {
	if len(ev.Data) == 0 {
		return out, nil // a comment or keep-alive
	}
	out, err := r.codec.event(&r.state, out, ev)
	if err != nil {
		r.stopped = true
	}
	return out, err
}

// choiceState is what a stream has written of one choice.
type choiceState struct {
	started   bool // the role chunk is written
	toolCalls int  // tool calls started
	finished  bool // the finish_reason chunk is written
}

// streamState is what a translated stream knows so far, and writes OpenAI's
// chunks with it. Chunks are written for the current choice (at); a
// provider that writes several choices (Gemini's candidates, for n > 1)
// switches between them with choose.
type streamState struct {
	id, model   string
	created     int64
	clientUsage bool
	n           int // the choices asked for (the client's n), at least 1

	usage     Usage
	cached    int64 // prompt tokens read from a cache (part of PromptTokens)
	reasoning int64 // completion tokens spent thinking (part of CompletionTokens)
	text      strings.Builder

	begun       bool          // a chunk is written (the answer's id is fixed)
	choiceState               // of the current choice
	at          int           // the current choice's index
	others      []choiceState // each choice's state, while another is current (n > 1)
	calls       int           // tool calls started, in every choice
	ended       int           // choices finished
	// logprobs is OpenAI's logprobs.content array for the next content
	// chunk (nil: none, the chunk's logprobs is null); lp is its buffer.
	logprobs, lp []byte

	done   bool // [DONE] or an error event is written
	failed bool // an error event is written
}

// choose makes choice i current.
func (s *streamState) choose(i int) error {
	if i == s.at {
		return nil
	}
	if i < 0 || i >= s.n {
		return fmt.Errorf("choice %d of an answer with %d", i, s.n)
	}
	if s.others == nil {
		s.others = make([]choiceState, s.n)
	}
	s.others[s.at] = s.choiceState
	s.choiceState, s.at = s.others[i], i
	return nil
}

// allFinished reports that every choice has its finish reason.
func (s *streamState) allFinished() bool { return s.ended >= s.n }

// Finish reasons of OpenAI's schema.
const (
	finishStop          = "stop"
	finishLength        = "length"
	finishToolCalls     = "tool_calls"
	finishContentFilter = "content_filter"
)

type streamChunk struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Created int64          `json:"created"`
	Model   string         `json:"model"`
	Choices []streamChoice `json:"choices"`
	// Usage is null on every chunk when the client asked for usage, as
	// OpenAI does, and the counts on the last one; absent otherwise.
	Usage any `json:"usage,omitempty"`
}

type streamChoice struct {
	Index        int         `json:"index"`
	Delta        streamDelta `json:"delta"`
	Logprobs     *struct{}   `json:"logprobs"`
	FinishReason *string     `json:"finish_reason"`
}

type streamDelta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
	// ReasoningContent is a piece of the model's reasoning, where
	// DeepSeek's API (and OpenAI-compatible servers after it) puts it.
	ReasoningContent *string          `json:"reasoning_content,omitempty"`
	ToolCalls        []streamToolCall `json:"tool_calls,omitempty"`
}

type streamToolCall struct {
	Index    int            `json:"index"`
	ID       string         `json:"id,omitempty"`
	Type     string         `json:"type,omitempty"`
	Function streamFunction `json:"function"`
}

type streamFunction struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// nullJSON marshals as null; it makes a present-but-null usage field.
type nullJSON struct{}

func (nullJSON) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

// chunk appends one chat.completion.chunk event with one choice. It is
// the per-event hot path of every translating adapter, so it appends the
// JSON itself — byte for byte what encoding/json writes for streamChunk
// (without HTML escaping), as the golden streams check — with no
// reflection and no allocation beyond out's growth.
func (s *streamState) chunk(out []byte, delta streamDelta, finish string) []byte {
	out = append(out, `data: {"id":`...)
	out = appendJSONString(out, s.id)
	out = append(out, `,"object":"chat.completion.chunk","created":`...)
	out = strconv.AppendInt(out, s.created, 10)
	out = append(out, `,"model":`...)
	out = appendJSONString(out, s.model)
	out = append(out, `,"choices":[{"index":`...)
	out = strconv.AppendInt(out, int64(s.at), 10)
	out = append(out, `,"delta":{`...)
	sep := false
	if delta.Role != "" {
		out = append(out, `"role":`...)
		out = appendJSONString(out, delta.Role)
		sep = true
	}
	if delta.Content != nil {
		if sep {
			out = append(out, ',')
		}
		out = append(out, `"content":`...)
		out = appendJSONString(out, *delta.Content)
		sep = true
	}
	if delta.ReasoningContent != nil {
		if sep {
			out = append(out, ',')
		}
		out = append(out, `"reasoning_content":`...)
		out = appendJSONString(out, *delta.ReasoningContent)
		sep = true
	}
	if len(delta.ToolCalls) > 0 {
		if sep {
			out = append(out, ',')
		}
		out = append(out, `"tool_calls":[`...)
		for i, tc := range delta.ToolCalls {
			if i > 0 {
				out = append(out, ',')
			}
			out = append(out, `{"index":`...)
			out = strconv.AppendInt(out, int64(tc.Index), 10)
			if tc.ID != "" {
				out = append(out, `,"id":`...)
				out = appendJSONString(out, tc.ID)
			}
			if tc.Type != "" {
				out = append(out, `,"type":`...)
				out = appendJSONString(out, tc.Type)
			}
			out = append(out, `,"function":{`...)
			if tc.Function.Name != "" {
				out = append(out, `"name":`...)
				out = appendJSONString(out, tc.Function.Name)
				out = append(out, ',')
			}
			out = append(out, `"arguments":`...)
			out = appendJSONString(out, tc.Function.Arguments)
			out = append(out, "}}"...)
		}
		out = append(out, ']')
	}
	out = append(out, `},"logprobs":`...)
	if s.logprobs != nil && delta.Content != nil && *delta.Content != "" {
		out = appendLogprobs(out, s.logprobs)
		s.logprobs = nil
	} else {
		out = append(out, "null"...)
	}
	out = append(out, `,"finish_reason":`...)
	if finish != "" {
		out = appendJSONString(out, finish)
	} else {
		out = append(out, "null"...)
	}
	out = append(out, "}]"...)
	if s.clientUsage {
		out = append(out, `,"usage":null`...)
	}
	return append(out, "}\n\n"...)
}

// appendJSONString appends v as a JSON string exactly as encoding/json
// writes it with HTML escaping off: \" \\ \b \f \n \r \t, \u00XX for the
// other control characters, \ufffd for invalid UTF-8, and \u2028 and
// \u2029 escaped.
func appendJSONString(out []byte, v string) []byte {
	const hex = "0123456789abcdef"
	out = append(out, '"')
	start := 0
	for i := 0; i < len(v); {
		if b := v[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			out = append(out, v[start:i]...)
			switch b {
			case '"', '\\':
				out = append(out, '\\', b)
			case '\b':
				out = append(out, '\\', 'b')
			case '\f':
				out = append(out, '\\', 'f')
			case '\n':
				out = append(out, '\\', 'n')
			case '\r':
				out = append(out, '\\', 'r')
			case '\t':
				out = append(out, '\\', 't')
			default:
				out = append(out, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(v[i:])
		if r == utf8.RuneError && size == 1 {
			out = append(out, v[start:i]...)
			out = append(out, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			out = append(out, v[start:i]...)
			out = append(out, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	out = append(out, v[start:]...)
	return append(out, '"')
}

// appendLogprobs appends a choice's logprobs object around its content
// array.
func appendLogprobs(out, content []byte) []byte {
	out = append(out, `{"content":`...)
	out = append(out, content...)
	return append(out, `,"refusal":null}`...)
}

func appendEvent(out []byte, v any) []byte {
	b, err := marshalJSON(v)
	if err != nil { // cannot happen: only strings and numbers
		return append(out, StreamErrorEvent("Tollgate could not encode a chunk.")...)
	}
	out = append(out, "data: "...)
	out = append(out, b...)
	return append(out, "\n\n"...)
}

// start writes the first chunk, which carries the role, once.
func (s *streamState) start(out []byte) []byte {
	if s.started {
		return out
	}
	s.started, s.begun = true, true
	empty := ""
	return s.chunk(out, streamDelta{Role: "assistant", Content: &empty}, "")
}

// content writes a piece of text.
func (s *streamState) content(out []byte, text string) []byte {
	if text == "" {
		return out
	}
	s.text.WriteString(text)
	return s.chunk(s.start(out), streamDelta{Content: &text}, "")
}

// reasoningContent writes a piece of the model's reasoning, which is
// output like the text (an answer cut off estimates it as such).
func (s *streamState) reasoningContent(out []byte, text string) []byte {
	if text == "" {
		return out
	}
	s.text.WriteString(text)
	return s.chunk(s.start(out), streamDelta{ReasoningContent: &text}, "")
}

// toolCallStart writes the first chunk of the next tool call and returns its
// index among the tool calls.
func (s *streamState) toolCallStart(out []byte, id, name, args string) ([]byte, int) {
	i := s.toolCalls
	s.toolCalls++
	s.calls++
	s.text.WriteString(args)
	out = s.chunk(s.start(out), streamDelta{ToolCalls: []streamToolCall{{
		Index: i, ID: id, Type: "function", Function: streamFunction{Name: name, Arguments: args},
	}}}, "")
	return out, i
}

// toolCallArguments writes a fragment of tool call i's arguments.
func (s *streamState) toolCallArguments(out []byte, i int, fragment string) []byte {
	if fragment == "" {
		return out
	}
	s.text.WriteString(fragment)
	return s.chunk(s.start(out), streamDelta{ToolCalls: []streamToolCall{{
		Index: i, Function: streamFunction{Arguments: fragment},
	}}}, "")
}

// finish writes the chunk with the finish reason, once.
func (s *streamState) finish(out []byte, reason string) []byte {
	if s.finished {
		return out
	}
	s.finished = true
	s.ended++
	return s.chunk(s.start(out), streamDelta{}, reason)
}

// close ends a stream that finished normally: the usage chunk if the client
// asked for it, then [DONE].
func (s *streamState) close(out []byte) []byte {
	if s.clientUsage {
		out = appendEvent(out, streamChunk{
			ID: s.id, Object: "chat.completion.chunk", Created: s.created, Model: s.model,
			Choices: []streamChoice{}, Usage: s.openAIUsage(),
		})
	}
	s.done = true
	return append(out, "data: [DONE]\n\n"...)
}

// fail ends a stream with an error event (no [DONE] follows it).
func (s *streamState) fail(out []byte, message string) []byte {
	s.done, s.failed = true, true
	return append(out, StreamErrorEvent(message)...)
}

// errEndedEarly is the message for a stream that stopped before its end.
const errEndedEarly = "The provider's stream ended before the reply was complete."

type openAIUsage struct {
	PromptTokens            int64              `json:"prompt_tokens"`
	CompletionTokens        int64              `json:"completion_tokens"`
	TotalTokens             int64              `json:"total_tokens"`
	PromptTokensDetails     *promptDetails     `json:"prompt_tokens_details,omitempty"`
	CompletionTokensDetails *completionDetails `json:"completion_tokens_details,omitempty"`
}

type promptDetails struct {
	CachedTokens int64 `json:"cached_tokens"`
}

type completionDetails struct {
	ReasoningTokens int64 `json:"reasoning_tokens"`
}

func (s *streamState) openAIUsage() *openAIUsage {
	u := &openAIUsage{
		PromptTokens:     s.usage.PromptTokens,
		CompletionTokens: s.usage.CompletionTokens,
		TotalTokens:      s.usage.PromptTokens + s.usage.CompletionTokens,
	}
	if s.cached > 0 {
		u.PromptTokensDetails = &promptDetails{CachedTokens: s.cached}
	}
	if s.reasoning > 0 {
		u.CompletionTokensDetails = &completionDetails{ReasoningTokens: s.reasoning}
	}
	return u
}

// completion is OpenAI's non-streamed chat.completion.
type completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []completionChoice `json:"choices"`
	Usage   *openAIUsage       `json:"usage,omitempty"`
}

type completionChoice struct {
	Index        int               `json:"index"`
	Message      completionMessage `json:"message"`
	Logprobs     json.RawMessage   `json:"logprobs"` // nil is null
	FinishReason string            `json:"finish_reason"`
}

type completionMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	// ReasoningContent is the model's reasoning, as DeepSeek's API has it.
	ReasoningContent *string    `json:"reasoning_content,omitempty"`
	Refusal          *string    `json:"refusal"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
}

// reply is a whole answer (one choice), gathered from a provider's
// non-streamed body.
type reply struct {
	index     int
	text      strings.Builder
	reasoning strings.Builder // the model's reasoning, if it shows it
	toolCalls []ToolCall
	finish    string
	logprobs  []byte // OpenAI's logprobs.content array, nil for none
}

func (r *reply) addToolCall(id, name, args string) {
	r.toolCalls = append(r.toolCalls, ToolCall{
		ID: id, Type: "function", Function: ToolFunction{Name: name, Arguments: args},
	})
}

// completion encodes the replies (one per choice) as a chat.completion,
// and records their text. Content is null when a reply is only tool calls,
// as OpenAI does.
func (s *streamState) completion(rs ...*reply) ([]byte, error) {
	c := completion{
		ID: s.id, Object: "chat.completion", Created: s.created, Model: s.model,
		Choices: make([]completionChoice, 0, len(rs)),
	}
	for _, r := range rs {
		text := r.text.String()
		s.text.WriteString(text)
		for _, c := range r.toolCalls {
			s.text.WriteString(c.Function.Arguments)
		}
		msg := completionMessage{Role: "assistant", Content: &text, ToolCalls: r.toolCalls}
		if text == "" && len(r.toolCalls) > 0 {
			msg.Content = nil
		}
		if r.reasoning.Len() > 0 {
			reasoning := r.reasoning.String()
			s.text.WriteString(reasoning)
			msg.ReasoningContent = &reasoning
		}
		choice := completionChoice{Index: r.index, Message: msg, FinishReason: r.finish}
		if r.logprobs != nil {
			choice.Logprobs = appendLogprobs(nil, r.logprobs)
		}
		c.Choices = append(c.Choices, choice)
	}
	if s.usage.Reported {
		c.Usage = s.openAIUsage()
	}
	return marshalJSON(c)
}

// parseInPlace parses a stream event without copying it: the results alias
// data, which the caller reuses after the event, so a string kept beyond
// the event must be cloned (strings.Clone); strings written into the
// client's bytes or the completion text are copied there anyway.
func parseInPlace(data []byte) gjson.Result {
	if len(data) == 0 {
		return gjson.Result{}
	}
	return gjson.Parse(unsafe.String(&data[0], len(data)))
}
