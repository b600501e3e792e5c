package provider

import (
	"bytes"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/sse"
)

// The demo provider (config.TypeDemo) is an OpenAI-type server that
// Tollgate answers itself: the same adapter, so that metering, records,
// streams, tools and the Responses API (by translation) work against it as
// against a real provider.
func init() {
	adapters[config.TypeOpenAI] = &openAI{}
	adapters[config.TypeDemo] = &openAI{}
}

// openAI serves OpenAI and every OpenAI-compatible server (vLLM, Ollama,
// Groq, Mistral…; a provider's profile says which, see profiles.go): the
// body passes through with the provider's model name, and the usage chunk
// Tollgate asks for is stripped unless the client asked.
type openAI struct{}

func (*openAI) Translate(req *Request, t Target) (Upstream, Response, error) {
	body, asked, err := openAIBody(req, t)
	if err != nil {
		return Upstream{}, nil, err
	}
	b, err := baseOf(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	up := Upstream{
		Path:      b.chatPath,
		Authority: b.host,
		Body:      body,
		Headers:   make([]Header, 1, 2),
	}
	up.Headers[0] = Header{"content-type", "application/json"}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"authorization", "Bearer " + k})
	}
	r := newOpenAIResponse(req, t.Model.ID)
	r.clientUsage = !asked
	return up, r, nil
}

// ResponsesUpstream is the request to an OpenAI-type server's Responses API
// (POST {base_url}/responses): body, with the deployment's credential. The
// body's tool call ids are made plain first (see unsignToolCallIDs): they
// may carry Gemini's signatures from an earlier turn.
func ResponsesUpstream(t Target, body []byte) (Upstream, error) {
	base, err := url.Parse(t.Provider.BaseURL)
	if err != nil {
		return Upstream{}, fmt.Errorf("provider %s: base_url: %w", t.Provider.Name, err)
	}
	up := Upstream{Path: base.Path + "/responses", Authority: base.Host, Body: body,
		Headers: []Header{{"content-type", "application/json"}}}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"authorization", "Bearer " + k})
	}
	return up, nil
}

// UnsignToolCallIDs is unsignToolCallIDs for a chat body going elsewhere
// than an adapter (the Responses API's own servers).
func UnsignToolCallIDs(body []byte) ([]byte, error) { return unsignToolCallIDs(body) }

// openAIBody rewrites only what must change, without re-encoding the rest:
// what the provider's profile refuses (profileBody), the model name, the output limit (the held one, in the field the server
// honours: limitField), include_usage on streams where the provider takes
// it (streamUsage; asked reports that Tollgate set it), and tool call ids
// that carry a Gemini signature (see unsignToolCallIDs).
func openAIBody(req *Request, t Target) (body []byte, asked bool, err error) {
	if body, err = profileBody(t.Provider.ProfileOf(), req.Body); err != nil {
		return nil, false, err
	}
	// A body already naming the deployment's model (the request's top
	// level names it once: validate refuses a key given twice) keeps it.
	if m := parseInPlace(body).Get("model"); m.Type != gjson.String || m.Str != t.Deployment.Model {
		body, err = sjson.SetBytes(body, "model", t.Deployment.Model)
		if err != nil {
			return nil, false, fmt.Errorf("rewrite model: %w", err)
		}
	}
	if t.Model != nil {
		if body, err = LimitToHeld(body, limitField(t), int64(t.Model.MaxTokens)); err != nil {
			return nil, false, err
		}
	}
	if body, err = unsignToolCallIDs(body); err != nil {
		return nil, false, err
	}
	return streamUsage(body, req, t.Provider)
}

// openAIResponse meters (and, for streams, filters) an OpenAI-shaped answer.
type openAIResponse struct {
	stream      bool
	clientUsage bool
	// model is the id the client asked for: every answer and chunk names
	// it, whatever the provider calls its model.
	model string
	// fields are the last event's, read once by event and used by pass.
	fields chunkFields
	// azure normalizes Azure OpenAI's quirks: its content-filter-only
	// stream chunks are dropped, and a non-streamed body gets the fields
	// OpenAI's schema requires and Azure may omit.
	azure  bool
	fail   *failure
	buf    []byte // a non-streamed body, until its end
	parser sse.Parser
	out    []byte
	usage  Usage
	text   strings.Builder
	failed bool // the provider sent an error event mid-stream, or broke off
	done   bool // the answer is whole: [DONE] seen, or the whole body read
}

func newOpenAIResponse(req *Request, model string) *openAIResponse {
	return &openAIResponse{stream: req.Stream, clientUsage: req.ClientUsage, model: model}
}

func (r *openAIResponse) Status(status int) int {
	if status >= 400 {
		r.fail = &failure{status: status}
	}
	return clientStatus(status)
}

func (r *openAIResponse) Usage() Usage       { return r.usage }
func (r *openAIResponse) Failed() bool       { return r.failed }
func (r *openAIResponse) Completed() bool    { return r.done && !r.failed && r.fail == nil }
func (r *openAIResponse) Completion() string { return r.text.String() }

func (r *openAIResponse) Body(piece []byte, end bool) ([]byte, error) {
	if r.fail != nil {
		return r.fail.body(piece, end), nil
	}
	if !r.stream {
		// A whole answer (it comes in one piece: the upstream step asks
		// for it buffered): metered, then named after the client's model.
		whole := piece
		if !end || len(r.buf) > 0 {
			r.buf = append(r.buf, piece...)
			whole = r.buf
		}
		if !end {
			return nil, nil
		}
		if !gjson.ValidBytes(whole) {
			r.failed = true
			return nil, ErrUntranslatable
		}
		r.readCompletion(whole)
		r.done = true
		if r.azure {
			whole = normalizeCompletion(whole)
		}
		if named, ok := withModel(whole, r.model); ok {
			return named, nil
		}
		return whole, nil
	}
	return r.streamPiece(piece, end)
}

// streamPiece forwards events unchanged, except the usage-only chunk when
// the client did not ask for it. When nothing is held back or dropped, the
// piece itself is returned, so the caller can leave the body untouched.
func (r *openAIResponse) streamPiece(piece []byte, end bool) ([]byte, error) {
	r.parser.Feed(piece)
	r.out = r.out[:0]
	dropped := false // or changed: the piece cannot go on as it is
	for {
		ev, ok := r.parser.Next()
		if !ok {
			break
		}
		if !r.pass(ev) {
			dropped = true
		}
	}
	if end {
		if ev, ok := r.parser.Finish(); ok {
			n := len(r.out)
			if !r.pass(ev) {
				dropped = true
			}
			if len(r.out) > n && !endsEvent(r.out) {
				// The last event lacked its blank line: it gets one, so
				// that an error event after it is an event of its own.
				r.out = append(r.out, "\n\n"...)
				dropped = true
			}
		}
		if !r.done && !r.failed {
			// The body ended without [DONE]: the provider broke off.
			r.failed = true
			r.out = append(r.out, StreamErrorEvent(errEndedEarly)...)
			dropped = true
		}
	}
	// Nothing of the piece is kept while the stream waits for the next:
	// the last event's fields point into it, and a buffer grown past
	// KeptBuffer goes with its answer.
	r.fields = chunkFields{}
	if !dropped && r.parser.Pending() == 0 && len(r.out) == len(piece) {
		return piece, nil
	}
	out := r.out
	r.out = reuse(out)
	return out, nil
}

// pass meters one event and appends what the client gets of it; it
// reports whether that is the event as it came. The provider puts
// "usage": null on every chunk when include_usage is on; when only
// Tollgate asked for it, the key is removed, so the client's stream is
// what the provider would have sent it.
func (r *openAIResponse) pass(ev sse.Event) bool {
	if !r.event(ev.Data) {
		return false
	}
	data, f := ev.Data, &r.fields
	drop := !r.clientUsage && f.usage.Type == gjson.Null && f.usage.Exists() &&
		f.usageKey > 0 && f.usage.Index > f.usageKey && f.usage.Index+len(f.usage.Raw) <= len(data)
	rename := f.model.Type == gjson.String && r.model != "" && f.model.Str != r.model &&
		f.model.Index > 0 && f.model.Index+len(f.model.Raw) <= len(data)
	if !drop && !rename {
		r.out = append(r.out, ev.Raw...)
		return true
	}
	if cap(r.out) == 0 {
		r.out = make([]byte, 0, 1<<10)
	}
	// The chunk is copied with the usage key cut out and the model named
	// in place; every other byte is kept as it came.
	us, ue := len(data), len(data)
	if drop {
		us, ue = f.usageKey, f.usage.Index+len(f.usage.Raw)
		j := us - 1
		for j > 0 && data[j] <= ' ' {
			j--
		}
		if data[j] == ',' {
			us = j // the comma before it goes with it
		} else {
			k := ue
			for k < len(data) && data[k] <= ' ' {
				k++
			}
			if k < len(data) && data[k] == ',' {
				ue = k + 1 // the first key: the comma after it goes
			}
		}
	}
	ms, me := len(data), len(data)
	if rename {
		ms, me = f.model.Index, f.model.Index+len(f.model.Raw)
	}
	r.out = append(r.out, "data: "...)
	at := 0
	if us <= ms {
		r.out, at = spliceOut(r.out, data, at, us, ue, "")
		r.out, at = spliceOut(r.out, data, at, ms, me, r.model)
	} else {
		r.out, at = spliceOut(r.out, data, at, ms, me, r.model)
		r.out, at = spliceOut(r.out, data, at, us, ue, "")
	}
	r.out = append(r.out, data[at:]...)
	r.out = append(r.out, "\n\n"...)
	return false
}

// spliceOut copies data[at:from] to out, then the JSON string model (if any)
// in place of data[from:to], and returns where the copy goes on. A cut at
// len(data) is no cut.
func spliceOut(out, data []byte, at, from, to int, model string) ([]byte, int) {
	if from >= len(data) {
		return out, at
	}
	out = append(out, data[at:from]...)
	if model != "" {
		out = appendJSONString(out, model)
	}
	return out, to
}

// chunkFields are the top-level fields of a stream chunk that the OpenAI
// adapter reads, found in one pass over the chunk.
type chunkFields struct {
	err, usage, object, choices, model gjson.Result
	xGroq                              gjson.Result // Groq's x_groq, whose usage ends its streams
	usageKey                           int          // where the "usage" key begins
}

// readChunk reads a chunk's top-level fields into f, in place: the table
// returned by value would sit twice on the stack of the stream's goroutine,
// which keeps the size it grows to.
func readChunk(data []byte, f *chunkFields) {
	*f = chunkFields{}
	parseInPlace(data).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "error":
			f.err = v
		case "usage":
			f.usage, f.usageKey = v, k.Index
		case "object":
			f.object = v
		case "choices":
			f.choices = v
		case "model":
			f.model = v
		case "x_groq":
			f.xGroq = v
		}
		return true
	})
}

// withModel names model in a JSON object's "model" field, when it has one
// with another value: the bytes around it are kept as they are.
func withModel(data []byte, model string) ([]byte, bool) {
	m := gjson.GetBytes(data, "model")
	if !m.Exists() || m.Type != gjson.String || m.Str == model || model == "" {
		return data, false
	}
	if m.Index <= 0 || m.Index+len(m.Raw) > len(data) {
		d, err := sjson.SetBytes(data, "model", model)
		return d, err == nil
	}
	out := make([]byte, 0, len(data)+len(model))
	out = append(out, data[:m.Index]...)
	out = appendJSONString(out, model)
	return append(out, data[m.Index+len(m.Raw):]...), true
}

// event meters one event and reports whether the client should get it.
// After an error event or [DONE], nothing more is passed on: the client gets
// exactly one end, and never [DONE] after an error. The fields read are
// this event's only: an event that is not a chunk (a keep-alive, [DONE])
// has none, so pass never cuts it at a former chunk's offsets.
func (r *openAIResponse) event(data []byte) bool {
	r.fields = chunkFields{}
	if r.failed || r.done {
		return false
	}
	if string(data) == "[DONE]" {
		r.done = true
		return true
	}
	if len(data) == 0 || data[0] != '{' {
		return true // a keep-alive
	}
	if !gjson.ValidBytes(data) {
		// An event that is not JSON: the provider's stream is broken.
		r.failed = true
		r.out = append(r.out, StreamErrorEvent("The provider sent an event Tollgate could not read.")...)
		return false
	}
	readChunk(data, &r.fields)
	f := &r.fields
	if f.err.IsObject() {
		r.failed = true // the provider's own error event, passed on as it is
		r.fields = chunkFields{}
		return true
	}
	noChoice := !f.choices.IsArray() || isEmptyArray(f.choices)
	if u := f.xGroq.Get("usage"); u.IsObject() && !f.usage.IsObject() {
		r.readUsage(u) // Groq's own counts, on its last chunk
	}
	if f.usage.IsObject() {
		r.readUsage(f.usage)
		if !r.clientUsage && noChoice {
			return false
		}
	} else if noChoice {
		// No choice and no counts ({}, {"usage":null}, "choices": null):
		// nothing for the client.
		return false
	}
	if r.azure && f.object.String() == "" {
		// Azure's content-filter annotations (the first chunk, with only
		// prompt_filter_results, and asynchronous filter results) are not
		// chunks in OpenAI's sense: empty id, model and object.
		return false
	}
	delta := f.choices.Get("0.delta")
	if c := delta.Get("content"); c.Type == gjson.String {
		r.text.WriteString(c.String())
	} else if c := f.choices.Get("0.text"); c.Type == gjson.String {
		r.text.WriteString(c.Str) // a legacy completion's chunk
	}
	for _, a := range delta.Get("tool_calls.#.function.arguments").Array() {
		r.text.WriteString(a.String())
	}
	return true
}

// readCompletion meters a whole chat.completion body, read once at its
// top level (its first usage and choices count, as gjson's Get reads
// them), and keeps its text.
func (r *openAIResponse) readCompletion(body []byte) {
	var usage, choices gjson.Result
	// Read in place: nothing read is kept but numbers and the text, copied.
	parseInPlace(body).ForEach(func(k, v gjson.Result) bool {
		switch {
		case k.Str == "usage" && !usage.Exists():
			usage = v
		case k.Str == "choices" && !choices.Exists():
			choices = v
		}
		return true
	})
	r.readUsage(usage)
	choices.ForEach(func(_, c gjson.Result) bool {
		if t := c.Get("text"); t.Exists() {
			r.text.WriteString(t.String()) // a legacy completion
		}
		if m := c.Get("message"); m.Exists() {
			r.text.WriteString(m.Get("content").String())
			m.Get("tool_calls").ForEach(func(_, call gjson.Result) bool {
				r.text.WriteString(call.Get("function.arguments").String())
				return true
			})
		}
		return true
	})
}

// normalizeCompletion adds the fields OpenAI's schema requires that some
// servers (Azure with older api-versions) omit: each choice's logprobs and
// its message's refusal, as null.
func normalizeCompletion(body []byte) []byte {
	choices := gjson.GetBytes(body, "choices").Array()
	for i, c := range choices {
		prefix := "choices." + strconv.Itoa(i)
		if !c.Get("logprobs").Exists() {
			if b, err := sjson.SetRawBytes(body, prefix+".logprobs", []byte("null")); err == nil {
				body = b
			}
		}
		if c.Get("message").IsObject() && !c.Get("message.refusal").Exists() {
			if b, err := sjson.SetRawBytes(body, prefix+".message.refusal", []byte("null")); err == nil {
				body = b
			}
		}
	}
	return body
}

func (r *openAIResponse) readUsage(u gjson.Result) {
	if !u.IsObject() {
		return
	}
	r.usage = Usage{
		PromptTokens:     u.Get("prompt_tokens").Int(),
		CompletionTokens: u.Get("completion_tokens").Int(),
		CachedTokens:     u.Get("prompt_tokens_details.cached_tokens").Int(),
		ReasoningTokens:  u.Get("completion_tokens_details.reasoning_tokens").Int(),
		Reported:         true,
	}
}

// endsEvent reports whether b ends with a blank line (an event's end).
func endsEvent(b []byte) bool {
	return bytes.HasSuffix(b, []byte("\n\n")) || bytes.HasSuffix(b, []byte("\r\r")) || bytes.HasSuffix(b, []byte("\n\r\n"))
}

func isEmptyArray(r gjson.Result) bool {
	return r.IsArray() && !r.Get("0").Exists()
}
