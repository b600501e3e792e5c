package responses

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/extproc/sse"
)

// Relay passes on the answer of a server that speaks the Responses API
// itself (an OpenAI deployment with responses_api): the response object,
// or the stream's events, with Tollgate's response id, the model the client
// asked for, the request's own parameters, and item ids that name the
// response and their index (so that item references find them), metered
// from the server's own usage.
type Relay struct {
	opt    Options
	status int

	whole  []byte
	parser sse.Parser
	out    []byte

	usage     provider.Usage
	text      strings.Builder
	ids       map[string]string // the server's item id → Tollgate's
	final     json.RawMessage   // the rewritten object, once complete
	reply     json.RawMessage
	completed bool
	failed    bool
	seq       int64 // the next sequence number, for an ending of Tollgate's own
}

// NewRelay relays a Responses-speaking server's answer.
func NewRelay(opt Options) *Relay {
	return &Relay{opt: opt, ids: map[string]string{}}
}

// Status maps a failure as every adapter does (provider.UpstreamError).
func (r *Relay) Status(status int) int {
	r.status = status
	if status >= 400 {
		status, _ = provider.UpstreamError(status, nil)
	}
	return status
}
func (r *Relay) Usage() provider.Usage { return r.usage }
func (r *Relay) Completion() string    { return r.text.String() }
func (r *Relay) Failed() bool          { return r.failed }
func (r *Relay) Completed() bool       { return r.completed && !r.failed }

// Final is the response object once complete, and the assistant's turn as
// a chat message; nil before or when it failed.
func (r *Relay) Final() (response, reply json.RawMessage) {
	if !r.Completed() {
		return nil, nil
	}
	return r.final, r.reply
}

func (r *Relay) Body(piece []byte, end bool) ([]byte, error) {
	if r.status < 200 || r.status >= 300 {
		// An error answer, buffered whole by the proxy: as every adapter
		// gives it.
		r.whole = append(r.whole, piece...)
		if !end {
			return nil, nil
		}
		_, body := provider.UpstreamError(r.status, r.whole)
		return body, nil
	}
	if !r.opt.Stream {
		r.whole = append(r.whole, piece...)
		if !end {
			return nil, nil
		}
		obj, ok := r.object(r.whole)
		if !ok {
			return nil, provider.ErrUntranslatable
		}
		return obj, nil
	}
	r.out = r.out[:0]
	eachEvent(&r.parser, piece, r.event)
	if end {
		lastEvent(&r.parser, r.event)
		if !r.completed && !r.failed {
			r.end("The provider's stream ended before its response was complete.")
		}
	}
	return r.out, nil
}

// ErrorEvent ends the stream with an error of Tollgate's own.
func (r *Relay) ErrorEvent(message string) []byte {
	r.out = r.out[:0]
	r.end(message)
	return append([]byte(nil), r.out...)
}

func (r *Relay) end(message string) {
	r.failed = true
	r.emit("error", map[string]any{"type": "error", "code": "server_error", "message": message, "param": nil, "sequence_number": r.seq})
	r.seq++
	resp := map[string]any{"id": r.opt.ID, "object": "response", "created_at": r.opt.Created.Unix(), "status": "failed", "model": r.opt.Model,
		"output": []any{}, "error": map[string]any{"code": "server_error", "message": message}}
	r.overlay(resp)
	r.emit("response.failed", map[string]any{"type": "response.failed", "response": resp, "sequence_number": r.seq})
	r.seq++
}

func (r *Relay) emit(typ string, ev map[string]any) {
	b, _ := json.Marshal(ev)
	r.out = append(r.out, "event: "...)
	r.out = append(r.out, typ...)
	r.out = append(r.out, "\ndata: "...)
	r.out = append(r.out, b...)
	r.out = append(r.out, "\n\n"...)
}

// event rewrites one event of the server's stream.
func (r *Relay) event(data []byte) {
	if len(data) == 0 || bytes.Equal(data, []byte("[DONE]")) || r.failed {
		return
	}
	var ev map[string]any
	if decode(data, &ev) != nil {
		r.end("The provider sent an event Tollgate could not read.")
		return
	}
	typ, _ := ev["type"].(string)
	if typ == "" {
		return // not an event of the API ({}, {"usage":null}): nothing to relay
	}
	if n, ok := ev["sequence_number"].(json.Number); ok {
		if v, err := n.Int64(); err == nil {
			r.seq = v + 1
		}
	}
	index := -1
	if n, ok := ev["output_index"].(json.Number); ok {
		if v, err := n.Int64(); err == nil {
			index = int(v)
		}
	}
	if item, ok := ev["item"].(map[string]any); ok {
		r.renameItem(item, index)
	}
	if id, ok := ev["item_id"].(string); ok {
		if ours, known := r.ids[id]; known {
			ev["item_id"] = ours
		}
	}
	if resp, ok := ev["response"].(map[string]any); ok {
		r.rewrite(resp)
		switch typ {
		case "response.completed", "response.incomplete":
			r.completed = true
			r.final, _ = json.Marshal(resp)
		case "response.failed":
			r.failed = true
		}
	}
	switch typ {
	case "response.output_text.delta":
		if d, ok := ev["delta"].(string); ok {
			r.text.WriteString(d)
		}
	case "error":
		r.failed = true
	}
	r.emit(typ, ev)
}

// object rewrites a whole response object.
func (r *Relay) object(body []byte) ([]byte, bool) {
	var resp map[string]any
	if decode(body, &resp) != nil || resp["object"] != "response" {
		return nil, false
	}
	r.rewrite(resp)
	out, err := json.Marshal(resp)
	if err != nil {
		return nil, false
	}
	r.final = out
	switch resp["status"] {
	case "completed", "incomplete":
		r.completed = true
	default:
		r.failed = true
	}
	return out, true
}

// rewrite makes a response object Tollgate's: its id, model, creation
// time and parameters, its items' ids; and reads its usage and its turn.
func (r *Relay) rewrite(resp map[string]any) {
	resp["id"], resp["model"], resp["created_at"] = r.opt.ID, r.opt.Model, r.opt.Created.Unix()
	r.overlay(resp)
	if v, ok := resp["usage"]; ok && v == nil {
		delete(resp, "usage") // not yet known: absent, as OpenAI's schema has it
	}
	output, _ := resp["output"].([]any)
	reply := map[string]any{"role": "assistant", "content": nil}
	var text string
	var calls []any
	for i, it := range output {
		item, ok := it.(map[string]any)
		if !ok {
			continue
		}
		r.renameItem(item, i)
		switch item["type"] {
		case "message":
			parts, _ := item["content"].([]any)
			for _, p := range parts {
				if pm, ok := p.(map[string]any); ok {
					if t, ok := pm["text"].(string); ok {
						text += t
					}
				}
			}
		case "function_call":
			calls = append(calls, map[string]any{"id": item["call_id"], "type": "function",
				"function": map[string]any{"name": item["name"], "arguments": item["arguments"]}})
		}
	}
	if text != "" {
		reply["content"] = text
	}
	if calls != nil {
		reply["tool_calls"] = calls
	}
	r.reply, _ = json.Marshal(reply)
	if u, ok := resp["usage"].(map[string]any); ok {
		b, _ := json.Marshal(u)
		g := gjson.ParseBytes(b)
		r.usage = provider.Usage{PromptTokens: g.Get("input_tokens").Int(), CompletionTokens: g.Get("output_tokens").Int(),
			CachedTokens: g.Get("input_tokens_details.cached_tokens").Int(), ReasoningTokens: g.Get("output_tokens_details.reasoning_tokens").Int(),
			Reported: true}
	}
}

// overlay sets the parameters a response repeats to the client's own (the
// server saw the request Tollgate rebuilt: no instructions of their own,
// store false).
func (r *Relay) overlay(resp map[string]any) {
	for k, v := range map[string]any{"instructions": nil, "metadata": map[string]any{}, "previous_response_id": nil, "store": true} {
		resp[k] = v
	}
	var echo map[string]json.RawMessage
	_ = json.Unmarshal(r.opt.Echo, &echo)
	for _, k := range []string{"instructions", "metadata", "previous_response_id", "store"} {
		if v, ok := echo[k]; ok && string(v) != "null" {
			resp[k] = v
		}
	}
}

// renameItem gives an output item Tollgate's id for its index.
func (r *Relay) renameItem(item map[string]any, index int) {
	theirs, _ := item["id"].(string)
	if ours, ok := r.ids[theirs]; ok && theirs != "" {
		item["id"] = ours
		return
	}
	if index < 0 {
		return
	}
	prefix := "item_"
	switch item["type"] {
	case "message":
		prefix = "msg_"
	case "function_call":
		prefix = "fc_"
	case "reasoning":
		prefix = "rs_"
	}
	ours := prefix + strings.TrimPrefix(r.opt.ID, IDPrefix) + "_" + strconv.Itoa(index)
	if theirs != "" {
		r.ids[theirs] = ours
	}
	item["id"] = ours
}

func decode(data []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	return d.Decode(v)
}
