package messages

import (
	"encoding/json"
	"strconv"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/sse"
	"github.com/tollgate/tollgate/oaierror"
)

// IDPrefix begins every message id Tollgate makes.
const IDPrefix = "msg_"

// Options describe the message an answer becomes.
type Options struct {
	// ID is the message's id when the provider gives none usable.
	ID string
	// Model is the model the client asked for, which the answer names.
	Model  string
	Stream bool
}

// Answer turns the chat completion (or chat chunks) an adapter makes of a
// provider's answer into a Messages answer: one message object, or
// Anthropic's stream of events. It wraps the adapter's provider.Response,
// whose usage, text and outcome it leaves as they are: metering is the
// chat path's, exactly.
type Answer struct {
	inner  provider.Response
	opt    Options
	status int

	whole  []byte // a whole answer (or an error body), gathered
	parser sse.Parser
	out    []byte

	begun   bool          // message_start written
	open    int           // the open content block's index, -1 for none
	inText  bool          // the open block is a text block
	inThink bool          // the open block is a thinking block
	blocks  int           // content blocks started
	calls   map[int64]int // chat tool call index → content block index
	stop    string        // the stop_reason
	ended   bool          // message_stop or an error event written
	failed  bool          // an error event written
}

// Wrap wraps an adapter's answer for a Messages request.
func Wrap(inner provider.Response, opt Options) *Answer {
	return &Answer{inner: inner, opt: opt, open: -1, calls: map[int64]int{}}
}

func (a *Answer) Status(status int) int {
	a.status = a.inner.Status(status)
	return a.status
}

func (a *Answer) Usage() provider.Usage { return a.inner.Usage() }
func (a *Answer) Completion() string    { return a.inner.Completion() }
func (a *Answer) Failed() bool          { return a.inner.Failed() || a.failed }
func (a *Answer) Completed() bool       { return a.inner.Completed() && !a.failed }

func (a *Answer) ok() bool { return a.status >= 200 && a.status < 300 }

// Body translates the adapter's output for this piece.
func (a *Answer) Body(piece []byte, end bool) ([]byte, error) {
	chat, err := a.inner.Body(piece, end)
	if !a.ok() || !a.opt.Stream {
		a.whole = append(a.whole, chat...)
		if err != nil || !end {
			return nil, err
		}
		if !a.ok() {
			return ErrorBody(a.status, a.whole), nil
		}
		out, terr := a.message(a.whole)
		if terr != nil {
			return nil, provider.ErrUntranslatable
		}
		return out, nil
	}
	a.out = a.out[:0]
	a.parser.Feed(chat)
	for !a.ended {
		ev, ok := a.parser.Next()
		if !ok {
			break
		}
		a.event(ev)
	}
	if end && err == nil && !a.ended {
		if ev, ok := a.parser.Finish(); ok {
			a.event(ev)
		}
		switch {
		case a.ended:
		case a.inner.Completed():
			a.finish() // a whole answer whose stream had no [DONE]
		default:
			a.fail(oaierror.UpstreamFailed.With("The provider's answer ended before it was complete.", ""))
		}
	}
	return a.out, err
}

// ErrorEvent ends a stream with Anthropic's error event.
func (a *Answer) ErrorEvent(e oaierror.Error) []byte {
	a.out = a.out[:0]
	a.fail(e)
	return append([]byte(nil), a.out...)
}

// event translates one chat chunk.
func (a *Answer) event(ev sse.Event) {
	data := ev.Data
	if len(data) == 0 {
		return
	}
	if string(data) == "[DONE]" {
		a.finish()
		return
	}
	c := gjson.ParseBytes(data)
	if e := c.Get("error"); e.Exists() {
		a.fail(oaierror.UpstreamFailed.With(e.Get("message").String(), ""))
		return
	}
	a.start(c.Get("id").String())
	ch := c.Get("choices.0")
	if !ch.Exists() {
		return // the usage chunk: read from the adapter at the end
	}
	d := ch.Get("delta")
	if t := d.Get("reasoning_content"); t.Type == gjson.String && t.Str != "" {
		// DeepSeek's reasoning, as a thinking block (with no signature:
		// the provider gives none).
		if !a.inThink {
			a.closeBlock()
			a.openBlock(`{"type":"thinking","thinking":"","signature":""}`)
			a.inThink = true
		}
		a.delta(a.open, `{"type":"thinking_delta","thinking":`+quote(t.Str)+`}`)
	}
	if t := d.Get("content"); t.Type == gjson.String && t.Str != "" {
		if !a.inText {
			a.closeBlock()
			a.openBlock(`{"type":"text","text":""}`)
			a.inText = true
		}
		a.delta(a.open, `{"type":"text_delta","text":`+quote(t.Str)+`}`)
	}
	d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		i := tc.Get("index").Int()
		block, known := a.calls[i]
		if !known {
			a.closeBlock()
			b, _ := json.Marshal(toolUse{Type: "tool_use", ID: tc.Get("id").String(),
				Name: tc.Get("function.name").String(), Input: json.RawMessage(`{}`)})
			block = a.openBlock(string(b))
			a.calls[i] = block
		}
		if args := tc.Get("function.arguments").String(); args != "" {
			a.delta(block, `{"type":"input_json_delta","partial_json":`+quote(args)+`}`)
		}
		return true
	})
	if f := ch.Get("finish_reason"); f.Type == gjson.String {
		a.stop = stopReason(f.Str)
		a.closeBlock()
	}
}

// start writes message_start once.
func (a *Answer) start(id string) {
	if a.begun {
		return
	}
	a.begun = true
	msg, _ := json.Marshal(map[string]any{"type": "message_start", "message": map[string]any{
		"id": a.id(id), "type": "message", "role": "assistant", "model": a.opt.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": map[string]int64{"input_tokens": 0, "output_tokens": 0},
	}})
	a.emit("message_start", string(msg))
}

// id is the message's id: the provider's when it is Anthropic's kind.
func (a *Answer) id(provider string) string {
	if len(provider) > len(IDPrefix) && provider[:len(IDPrefix)] == IDPrefix {
		return provider
	}
	return a.opt.ID
}

func (a *Answer) openBlock(contentBlock string) int {
	i := a.blocks
	a.blocks++
	a.open = i
	a.emit("content_block_start", `{"type":"content_block_start","index":`+strconv.Itoa(i)+`,"content_block":`+contentBlock+`}`)
	if i == 0 {
		a.emit("ping", `{"type": "ping"}`)
	}
	return i
}

func (a *Answer) delta(index int, delta string) {
	a.emit("content_block_delta", `{"type":"content_block_delta","index":`+strconv.Itoa(index)+`,"delta":`+delta+`}`)
}

func (a *Answer) closeBlock() {
	if a.open < 0 {
		return
	}
	a.emit("content_block_stop", `{"type":"content_block_stop","index":`+strconv.Itoa(a.open)+`}`)
	a.open, a.inText, a.inThink = -1, false, false
}

// finish ends a complete answer: message_delta with the stop reason and
// the usage, then message_stop.
func (a *Answer) finish() {
	a.start("")
	a.closeBlock()
	stop := a.stop
	if stop == "" {
		stop = "end_turn"
	}
	u := usage(a.inner.Usage())
	md, _ := json.Marshal(map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": u})
	a.emit("message_delta", string(md))
	a.emit("message_stop", `{"type":"message_stop"}`)
	a.ended = true
}

// fail ends the stream with an error event (no message_stop follows it).
func (a *Answer) fail(e oaierror.Error) {
	if a.ended {
		return
	}
	a.ended, a.failed = true, true
	a.emit("error", string(e.AnthropicBody()))
}

func (a *Answer) emit(name, data string) {
	a.out = append(a.out, "event: "...)
	a.out = append(a.out, name...)
	a.out = append(a.out, "\ndata: "...)
	a.out = append(a.out, data...)
	a.out = append(a.out, "\n\n"...)
}

// message turns a chat completion into a message object.
func (a *Answer) message(chat []byte) ([]byte, error) {
	if !gjson.ValidBytes(chat) {
		return nil, errNotJSON
	}
	c := gjson.ParseBytes(chat)
	ch := c.Get("choices.0")
	content := []any{}
	if t := ch.Get("message.reasoning_content"); t.Type == gjson.String && t.Str != "" {
		content = append(content, map[string]any{"type": "thinking", "thinking": t.Str, "signature": ""})
	}
	if t := ch.Get("message.content"); t.Type == gjson.String && t.Str != "" {
		content = append(content, map[string]any{"type": "text", "text": t.Str})
	}
	ch.Get("message.tool_calls").ForEach(func(_, tc gjson.Result) bool {
		input := json.RawMessage(`{}`)
		if args := tc.Get("function.arguments").String(); gjson.Valid(args) && gjson.Parse(args).IsObject() {
			input = json.RawMessage(args)
		}
		content = append(content, toolUse{Type: "tool_use", ID: tc.Get("id").String(),
			Name: tc.Get("function.name").String(), Input: input})
		return true
	})
	return json.Marshal(map[string]any{
		"id": a.id(c.Get("id").String()), "type": "message", "role": "assistant", "model": a.opt.Model,
		"content": content, "stop_reason": stopReason(ch.Get("finish_reason").String()), "stop_sequence": nil,
		"usage": usage(a.inner.Usage()),
	})
}

// toolUse is a tool_use content block, its fields in Anthropic's order.
type toolUse struct {
	Type  string          `json:"type"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type answerError string

func (e answerError) Error() string { return string(e) }

const errNotJSON = answerError("messages: the chat answer is not JSON")

// stopReason is chat's finish_reason as Anthropic's stop_reason.
func stopReason(finish string) string {
	switch finish {
	case "length":
		return "max_tokens"
	case "tool_calls", "function_call":
		return "tool_use"
	case "content_filter":
		return "refusal"
	}
	return "end_turn"
}

// usage is Anthropic's usage object: its input_tokens leave out the
// tokens read from and written to the prompt cache, which chat's
// prompt_tokens count.
func usage(u provider.Usage) map[string]int64 {
	return map[string]int64{
		"input_tokens":                max(u.PromptTokens-u.CachedTokens-u.CacheWriteTokens, 0),
		"output_tokens":               u.CompletionTokens,
		"cache_read_input_tokens":     u.CachedTokens,
		"cache_creation_input_tokens": u.CacheWriteTokens,
	}
}

// ErrorBody is an OpenAI-shaped error body (what the adapters and
// Tollgate write) in Anthropic's shape, with the client's status.
func ErrorBody(status int, openAI []byte) []byte {
	e := oaierror.Error{Status: status, Message: gjson.GetBytes(openAI, "error.message").String(),
		Code: gjson.GetBytes(openAI, "error.code").String()}
	if e.Message == "" {
		e.Message = "The provider failed to answer."
	}
	return e.AnthropicBody()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
