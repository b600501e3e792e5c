package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/sse"
)

// IDPrefix begins every response id.
const IDPrefix = "resp_"

// Options describe the response an answer becomes.
type Options struct {
	// ID is the response's id (IDPrefix…), drawn by the router.
	ID string
	// Model is the model the client asked for.
	Model   string
	Created time.Time
	Stream  bool
	// Echo is Request.Echo: the parameters the response repeats.
	Echo json.RawMessage
}

// Answer turns the chat completion (or chat chunks) an adapter makes of the
// provider's answer into a response object (or the Responses stream's
// events). It wraps the adapter's provider.Response, whose usage, text and
// outcome it leaves as they are: metering is the chat path's, exactly.
type Answer struct {
	inner  provider.Response
	opt    Options
	status int

	whole  []byte // a whole answer, gathered
	parser sse.Parser
	out    []byte
	seq    int
	begun  bool // response.created sent
	ended  bool // response.completed or .failed sent

	items  []*item // in output order
	text   *item   // the open message, nil when none
	think  *item   // the open reasoning item, nil when none
	calls  map[int64]*item
	finish string
	usage  gjson.Result
	failed bool

	final []byte // the response object at the end
}

// item is one output item being built.
type item struct {
	kind      string // message, function_call or reasoning
	id        string
	index     int
	text      strings.Builder // message text, or call arguments
	callID    string
	name      string
	done      bool
	callIndex int64
}

// Wrap wraps an adapter's answer for a Responses request.
func Wrap(inner provider.Response, opt Options) *Answer {
	return &Answer{inner: inner, opt: opt, calls: map[int64]*item{}}
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
	if !a.ok() {
		return chat, err // errors have the same shape on both APIs
	}
	if !a.opt.Stream {
		a.whole = append(a.whole, chat...)
		if err != nil || !end {
			return nil, err
		}
		out, terr := a.completion(a.whole)
		if terr != nil {
			return nil, provider.ErrUntranslatable
		}
		return out, nil
	}
	a.out = a.out[:0]
	a.begin()
	eachEvent(&a.parser, chat, a.event)
	if end && err == nil && !a.ended {
		lastEvent(&a.parser, a.event)
		switch {
		case a.ended:
		case a.inner.Completed():
			a.complete() // a whole answer whose stream had no [DONE]
		default:
			a.fail("server_error", "The provider's answer ended before it was complete.")
		}
	}
	return a.out, err
}

// ErrorEvent ends a stream with an error: the error event, then
// response.failed.
func (a *Answer) ErrorEvent(message string) []byte {
	a.out = a.out[:0]
	a.begin()
	a.fail("server_error", message)
	return append([]byte(nil), a.out...)
}

// Final is the response object once the answer completed, and the
// assistant's turn as a chat message (for previous_response_id); nil
// before, or when it failed.
func (a *Answer) Final() (response, reply json.RawMessage) {
	if a.final == nil || a.failed {
		return nil, nil
	}
	msg := map[string]any{"role": "assistant", "content": nil}
	var calls []map[string]any
	for _, it := range a.items {
		switch it.kind {
		case "reasoning":
			msg["reasoning_content"] = it.text.String()
		case "message":
			msg["content"] = it.text.String()
		case "function_call":
			calls = append(calls, map[string]any{"id": it.callID, "type": "function",
				"function": map[string]any{"name": it.name, "arguments": it.text.String()}})
		}
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	reply, _ = json.Marshal(msg)
	return a.final, reply
}

// event handles one chat chunk.
func (a *Answer) event(data []byte) {
	if a.ended || len(data) == 0 {
		return
	}
	if bytes.Equal(data, []byte("[DONE]")) {
		a.complete()
		return
	}
	c := gjson.ParseBytes(data)
	if e := c.Get("error"); e.IsObject() { // "error": null is no error
		a.fail(e.Get("code").String(), e.Get("message").String())
		return
	}
	if u := c.Get("usage"); u.IsObject() {
		a.usage = u
	}
	choice := c.Get("choices.0")
	if !choice.Exists() {
		return
	}
	delta := choice.Get("delta")
	if t := delta.Get("reasoning_content"); t.Type == gjson.String && t.String() != "" {
		a.reasoningDelta(t.String())
	}
	for _, field := range []string{"content", "refusal"} {
		if t := delta.Get(field); t.Type == gjson.String && t.String() != "" {
			a.textDelta(t.String())
		}
	}
	delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		a.callDelta(tc)
		return true
	})
	if f := choice.Get("finish_reason"); f.Type == gjson.String {
		a.finish = f.String()
		a.closeAll()
	}
}

func (a *Answer) itemID(prefix string) string {
	return prefix + strings.TrimPrefix(a.opt.ID, IDPrefix) + "_" + strconv.Itoa(len(a.items))
}

// reasoningDelta streams a chat chunk's reasoning_content (DeepSeek's) as
// a reasoning item's reasoning_text.
func (a *Answer) reasoningDelta(t string) {
	if a.think == nil {
		a.think = &item{kind: "reasoning", id: a.itemID("rs_"), index: len(a.items)}
		a.items = append(a.items, a.think)
		a.emit("response.output_item.added", map[string]any{"output_index": a.think.index, "item": a.itemJSON(a.think, "in_progress")})
	}
	a.think.text.WriteString(t)
	a.emit("response.reasoning_text.delta", map[string]any{"item_id": a.think.id, "output_index": a.think.index, "content_index": 0, "delta": t})
}

func (a *Answer) closeReasoning() {
	it := a.think
	if it == nil {
		return
	}
	a.think, it.done = nil, true
	a.emit("response.reasoning_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0, "text": it.text.String()})
	a.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": a.itemJSON(it, "completed")})
}

func (a *Answer) textDelta(t string) {
	a.closeReasoning()
	if a.text == nil {
		a.text = &item{kind: "message", id: a.itemID("msg_"), index: len(a.items)}
		a.items = append(a.items, a.text)
		a.emit("response.output_item.added", map[string]any{"output_index": a.text.index, "item": a.itemJSON(a.text, "in_progress")})
		a.emit("response.content_part.added", map[string]any{"item_id": a.text.id, "output_index": a.text.index, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}})
	}
	a.text.text.WriteString(t)
	a.emit("response.output_text.delta", map[string]any{"item_id": a.text.id, "output_index": a.text.index, "content_index": 0,
		"delta": t, "logprobs": []any{}})
}

func (a *Answer) callDelta(tc gjson.Result) {
	idx := tc.Get("index").Int()
	it := a.calls[idx]
	if it == nil {
		a.closeReasoning()
		a.closeText()
		it = &item{kind: "function_call", id: a.itemID("fc_"), index: len(a.items), callID: tc.Get("id").String(),
			name: tc.Get("function.name").String(), callIndex: idx}
		a.calls[idx] = it
		a.items = append(a.items, it)
		a.emit("response.output_item.added", map[string]any{"output_index": it.index, "item": a.itemJSON(it, "in_progress")})
	}
	if args := tc.Get("function.arguments").String(); args != "" {
		it.text.WriteString(args)
		a.emit("response.function_call_arguments.delta", map[string]any{"item_id": it.id, "output_index": it.index, "delta": args})
	}
}

func (a *Answer) closeText() {
	it := a.text
	if it == nil {
		return
	}
	a.text, it.done = nil, true
	text := it.text.String()
	a.emit("response.output_text.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0,
		"text": text, "logprobs": []any{}})
	a.emit("response.content_part.done", map[string]any{"item_id": it.id, "output_index": it.index, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}})
	a.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": a.itemJSON(it, "completed")})
}

func (a *Answer) closeAll() {
	a.closeReasoning()
	a.closeText()
	for _, it := range a.items {
		if it.kind != "function_call" || it.done {
			continue
		}
		it.done = true
		a.emit("response.function_call_arguments.done", map[string]any{"item_id": it.id, "output_index": it.index,
			"name": it.name, "arguments": it.text.String()})
		a.emit("response.output_item.done", map[string]any{"output_index": it.index, "item": a.itemJSON(it, "completed")})
	}
}

func (a *Answer) itemJSON(it *item, status string) map[string]any {
	if it.kind == "reasoning" {
		content := []any{}
		if status == "completed" {
			content = append(content, map[string]any{"type": "reasoning_text", "text": it.text.String()})
		}
		return map[string]any{"type": "reasoning", "id": it.id, "summary": []any{}, "content": content}
	}
	if it.kind == "function_call" {
		args := ""
		if status == "completed" {
			args = it.text.String()
		}
		return map[string]any{"type": "function_call", "id": it.id, "call_id": it.callID, "name": it.name, "arguments": args, "status": status}
	}
	content := []any{}
	if status == "completed" {
		content = append(content, map[string]any{"type": "output_text", "text": it.text.String(), "annotations": []any{}, "logprobs": []any{}})
	}
	return map[string]any{"type": "message", "id": it.id, "role": "assistant", "status": status, "content": content}
}

func (a *Answer) begin() {
	if a.begun {
		return
	}
	a.begun = true
	r := a.object("in_progress", nil)
	a.emit("response.created", map[string]any{"response": r})
	a.emit("response.in_progress", map[string]any{"response": r})
}

func (a *Answer) complete() {
	a.closeAll()
	a.ended = true
	status := "completed"
	var incomplete any
	switch a.finish {
	case "length":
		status, incomplete = "incomplete", map[string]any{"reason": "max_output_tokens"}
	case "content_filter":
		status, incomplete = "incomplete", map[string]any{"reason": "content_filter"}
	}
	r := a.object(status, incomplete)
	a.final, _ = json.Marshal(r)
	a.emit("response.completed", map[string]any{"response": r})
}

func (a *Answer) fail(code, message string) {
	if a.ended {
		return
	}
	a.ended, a.failed = true, true
	if code == "" {
		code = "server_error"
	}
	a.emit("error", map[string]any{"code": code, "message": message, "param": nil})
	r := a.object("failed", nil)
	r["error"] = map[string]any{"code": "server_error", "message": message}
	a.emit("response.failed", map[string]any{"response": r})
}

// object is the response object in its present state.
func (a *Answer) object(status string, incomplete any) map[string]any {
	r := map[string]any{
		"id": a.opt.ID, "object": "response", "created_at": a.opt.Created.Unix(), "status": status, "model": a.opt.Model,
		"error": nil, "incomplete_details": incomplete, "instructions": nil, "max_output_tokens": nil,
		"metadata": map[string]any{}, "parallel_tool_calls": true, "previous_response_id": nil, "reasoning": nil,
		"store": true, "temperature": nil, "top_p": nil, "tool_choice": "auto", "tools": []any{},
		"text": map[string]any{"format": map[string]any{"type": "text"}}, "truncation": "disabled",
	}
	var echo map[string]json.RawMessage
	_ = json.Unmarshal(a.opt.Echo, &echo)
	for k, v := range echo {
		if k == "reasoning" && !gjson.GetBytes(v, "effort").Exists() {
			continue
		}
		if string(v) != "null" || r[k] == nil {
			r[k] = v
		}
	}
	output := []any{}
	if status != "in_progress" {
		for _, it := range a.items {
			output = append(output, a.itemJSON(it, "completed"))
		}
	}
	r["output"] = output
	if status == "completed" || status == "incomplete" {
		r["completed_at"] = time.Now().Unix()
		if a.usage.Exists() {
			r["usage"] = usageJSON(a.inner.Usage())
		}
	}
	return r
}

// usageJSON is the answer's usage in the Responses API's terms: the
// adapter's counts, which are also what is metered.
func usageJSON(u provider.Usage) map[string]any {
	return map[string]any{
		"input_tokens": u.PromptTokens, "output_tokens": u.CompletionTokens, "total_tokens": u.PromptTokens + u.CompletionTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CachedTokens, "cache_write_tokens": u.CacheWriteTokens},
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
	}
}

func (a *Answer) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = a.seq
	a.seq++
	b, _ := json.Marshal(fields)
	a.out = append(a.out, "event: "...)
	a.out = append(a.out, typ...)
	a.out = append(a.out, "\ndata: "...)
	a.out = append(a.out, b...)
	a.out = append(a.out, "\n\n"...)
}

// completion turns a whole chat completion into a response object.
func (a *Answer) completion(body []byte) ([]byte, error) {
	if !gjson.ValidBytes(body) {
		return nil, provider.ErrUntranslatable
	}
	c := gjson.ParseBytes(body)
	choice := c.Get("choices.0")
	msg := choice.Get("message")
	if t := msg.Get("reasoning_content"); t.Type == gjson.String && t.String() != "" {
		it := &item{kind: "reasoning", id: a.itemID("rs_"), index: len(a.items)}
		it.text.WriteString(t.String())
		a.items = append(a.items, it)
	}
	var text string
	for _, field := range []string{"content", "refusal"} {
		if t := msg.Get(field); t.Type == gjson.String {
			text += t.String()
		}
	}
	if text != "" {
		it := &item{kind: "message", id: a.itemID("msg_"), index: len(a.items)}
		it.text.WriteString(text)
		a.items = append(a.items, it)
	}
	msg.Get("tool_calls").ForEach(func(i, tc gjson.Result) bool {
		it := &item{kind: "function_call", id: a.itemID("fc_"), index: len(a.items), callID: tc.Get("id").String(),
			name: tc.Get("function.name").String(), callIndex: i.Int()}
		it.text.WriteString(tc.Get("function.arguments").String())
		a.items = append(a.items, it)
		return true
	})
	a.finish = choice.Get("finish_reason").String()
	if u := c.Get("usage"); u.IsObject() {
		a.usage = u
	}
	a.seq = 0
	a.out = a.out[:0]
	a.complete()
	a.out = a.out[:0] // the event is not sent: the object is the answer
	return a.final, nil
}
