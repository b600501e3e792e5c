// Package responses serves OpenAI's Responses API (POST /v1/responses) on
// every provider through one intermediate form: the chat-completion request
// every adapter already translates. A Responses request becomes a chat
// request (ToChat); the provider's answer, once its adapter has made it a
// chat completion or chat chunks, becomes a response object or the
// Responses stream's events (Wrap). Nothing here knows a provider.
package responses

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// Request is what the router learns of a Responses request besides the
// chat body it becomes.
type Request struct {
	Model string
	// Stream is the client's stream flag.
	Stream bool
	// Store is whether to keep the response (default true, as OpenAI's).
	Store bool
	// Previous is previous_response_id, "" for none.
	Previous string
	// Instructions is true when the body sets instructions: the chat
	// body's first message is then theirs.
	Instructions bool
	// Echo is the request's own parameters, as a response object repeats
	// them (instructions, tools, tool_choice, text, temperature…): a JSON
	// object.
	Echo json.RawMessage
}

// ignored are parameters taken and not acted on: they change nothing a
// chat provider could do (include asks for extra output items Tollgate
// does not make; truncation "disabled" is the behaviour).
var ignored = map[string]bool{
	"include": true, "truncation": true, "service_tier": true, "prompt_cache_key": true, "safety_identifier": true,
	"stream_options": true,
}

// known are the parameters ToChat translates.
var known = map[string]bool{
	"model": true, "input": true, "instructions": true, "tools": true, "tool_choice": true, "text": true,
	"max_output_tokens": true, "temperature": true, "top_p": true, "reasoning": true, "metadata": true,
	"stream": true, "store": true, "previous_response_id": true, "parallel_tool_calls": true, "user": true,
	"background": true,
}

// content is a chat message's content as JSON: a string, or a list of
// parts of strings (neither can fail to encode).
func content(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func invalid(param, format string, args ...any) *oaierror.Error {
	e := oaierror.Invalid("invalid_request", param, fmt.Sprintf(format, args...))
	return &e
}

func unsupported(param, why string) *oaierror.Error {
	e := oaierror.Invalid("unsupported_parameter", param, fmt.Sprintf("The parameter %q is not supported on /v1/responses by Tollgate: %s", param, why))
	return &e
}

// ToChat reads a Responses request and writes the chat-completion request
// it stands for: history (the stored conversation of previous_response_id,
// chat messages as JSON, nil for none) comes after the instructions and
// before the new input. The chat body asks for the usage of a stream, so
// the answer can always report it. Its own messages (without the
// instructions) are returned too: with the answer's, they are what a
// stored response keeps for the next turn.
//
// resolve finds the output item an item_reference names (an item of a
// stored response); nil refuses every reference.
func ToChat(body []byte, history []json.RawMessage, resolve Resolver) (Request, []byte, []json.RawMessage, *oaierror.Error) {
	if !gjson.ValidBytes(body) {
		return Request{}, nil, nil, invalid("", "The request body is not valid JSON.")
	}
	root := gjson.ParseBytes(body)
	if !root.IsObject() {
		return Request{}, nil, nil, invalid("", "The request body must be a JSON object.")
	}
	if e := unknownParameter(root); e != nil {
		return Request{}, nil, nil, e
	}
	chat := map[string]any{}
	r, e := requestOf(root, chat)
	if e != nil {
		return Request{}, nil, nil, e
	}
	var msgs []json.RawMessage
	if v := root.Get("instructions"); v.Exists() && v.Type != gjson.Null {
		r.Instructions = true
		if v.Type != gjson.String {
			return Request{}, nil, nil, invalid("instructions", "instructions must be a string.")
		}
		b, _ := json.Marshal(provider.ChatMessage{Role: "system", Content: content(v.String())})
		msgs = append(msgs, b)
	}
	msgs = append(msgs, history...)
	own, e := ownMessages(root.Get("input"), resolve)
	if e != nil {
		return Request{}, nil, nil, e
	}
	chat["messages"] = append(msgs, own...)
	if e := settings(root, chat); e != nil {
		return Request{}, nil, nil, e
	}
	out, err := json.Marshal(chat)
	if err != nil {
		return Request{}, nil, nil, invalid("", "The request could not be translated: %v", err)
	}
	r.Echo = echoOf(root)
	return r, out, own, nil
}

// unknownParameter refuses the first parameter ToChat neither translates
// nor knows to ignore.
func unknownParameter(root gjson.Result) *oaierror.Error {
	var bad *oaierror.Error
	root.ForEach(func(k, _ gjson.Result) bool {
		if !known[k.String()] && !ignored[k.String()] {
			bad = unsupported(k.String(), "remove it.")
		}
		return bad == nil
	})
	return bad
}

// requestOf reads the request's model, stream, store, background and
// previous_response_id, and writes the chat request's model and stream.
func requestOf(root gjson.Result, chat map[string]any) (Request, *oaierror.Error) {
	r := Request{Store: true}
	model := root.Get("model")
	if model.Type != gjson.String || model.String() == "" {
		return Request{}, invalid("model", "model is required: the id of a model, as GET /v1/models lists.")
	}
	r.Model = model.String()
	chat["model"] = r.Model
	for _, flag := range []struct {
		name string
		into *bool
	}{{"stream", &r.Stream}, {"store", &r.Store}} {
		if v := root.Get(flag.name); v.Exists() && v.Type != gjson.Null {
			if v.Type != gjson.True && v.Type != gjson.False {
				return Request{}, invalid(flag.name, "%s must be true or false.", flag.name)
			}
			*flag.into = v.Bool()
		}
	}
	if v := root.Get("background"); v.Exists() && v.Type != gjson.False && v.Type != gjson.Null {
		return Request{}, unsupported("background", "responses are answered while the request waits.")
	}
	if r.Stream {
		chat["stream"] = true
		chat["stream_options"] = map[string]any{"include_usage": true}
	}
	if v := root.Get("previous_response_id"); v.Exists() && v.Type != gjson.Null {
		if v.Type != gjson.String || !strings.HasPrefix(v.String(), IDPrefix) {
			return Request{}, invalid("previous_response_id", "previous_response_id must be the id of a stored response (resp_…).")
		}
		r.Previous = v.String()
	}
	return r, nil
}

// ownMessages is the request's input as chat messages, each as JSON.
func ownMessages(input gjson.Result, resolve Resolver) ([]json.RawMessage, *oaierror.Error) {
	own, e := inputMessages(input, resolve)
	if e != nil {
		return nil, e
	}
	raw := make([]json.RawMessage, 0, len(own))
	for _, m := range own {
		b, err := json.Marshal(m)
		if err != nil {
			return nil, invalid("input", "The input could not be translated: %v", err)
		}
		raw = append(raw, b)
	}
	return raw, nil
}

// settings translates tools, text.format, the sampling settings, the
// output limit and reasoning, and checks metadata.
func settings(root gjson.Result, chat map[string]any) *oaierror.Error {
	if e := tools(root, chat); e != nil {
		return e
	}
	if e := textFormat(root.Get("text"), chat); e != nil {
		return e
	}
	for from, to := range map[string]string{"max_output_tokens": "max_completion_tokens", "temperature": "temperature", "top_p": "top_p",
		"parallel_tool_calls": "parallel_tool_calls", "user": "user"} {
		if v := root.Get(from); v.Exists() && v.Type != gjson.Null {
			chat[to] = json.RawMessage(v.Raw)
		}
	}
	if v := root.Get("reasoning"); v.Exists() && v.Type != gjson.Null {
		if !v.IsObject() {
			return invalid("reasoning", "reasoning must be an object such as {\"effort\":\"low\"}.")
		}
		if eff := v.Get("effort"); eff.Exists() && eff.Type != gjson.Null {
			chat["reasoning_effort"] = json.RawMessage(eff.Raw)
		}
	}
	if v := root.Get("metadata"); v.Exists() && v.Type != gjson.Null && !v.IsObject() {
		return invalid("metadata", "metadata must be an object of strings.")
	}
	return nil
}

// echoOf keeps the parameters a response object repeats.
func echoOf(root gjson.Result) json.RawMessage {
	echo := map[string]json.RawMessage{}
	for _, name := range []string{"instructions", "tool_choice", "text", "temperature", "top_p", "max_output_tokens",
		"reasoning", "metadata", "parallel_tool_calls", "previous_response_id", "user", "store"} {
		if v := root.Get(name); v.Exists() {
			echo[name] = json.RawMessage(v.Raw)
		}
	}
	// Tools as a response shows them: every field of a function tool,
	// strict as it was applied (false unless asked: chat's default).
	if t := root.Get("tools"); t.IsArray() {
		var tools []map[string]any
		t.ForEach(func(_, tool gjson.Result) bool {
			fn := map[string]any{"type": "function", "name": tool.Get("name").String(), "strict": tool.Get("strict").Bool(),
				"description": nil, "parameters": nil}
			if d := tool.Get("description"); d.Type == gjson.String {
				fn["description"] = d.String()
			}
			if p := tool.Get("parameters"); p.IsObject() {
				fn["parameters"] = json.RawMessage(p.Raw)
			}
			tools = append(tools, fn)
			return true
		})
		if b, err := json.Marshal(tools); err == nil && tools != nil {
			echo["tools"] = b
		}
	}
	b, _ := json.Marshal(echo)
	return b
}

// inputMessages turns input (a string, or a list of items) into chat
// messages.
func inputMessages(input gjson.Result, resolve Resolver) ([]provider.ChatMessage, *oaierror.Error) {
	switch {
	case !input.Exists() || input.Type == gjson.Null:
		return nil, invalid("input", "input is required: a string, or a list of input items.")
	case input.Type == gjson.String:
		return []provider.ChatMessage{{Role: "user", Content: content(input.String())}}, nil
	case !input.IsArray():
		return nil, invalid("input", "input must be a string or a list of input items.")
	}
	var msgs []provider.ChatMessage
	var bad *oaierror.Error
	reasoning := ""
	input.ForEach(func(i, item gjson.Result) bool {
		msgs, bad = addItem(msgs, item, fmt.Sprintf("input[%d]", i.Int()), resolve, &reasoning)
		return bad == nil
	})
	if bad != nil {
		return nil, bad
	}
	if len(msgs) == 0 {
		return nil, invalid("input", "input must hold at least one item.")
	}
	return msgs, nil
}

// addItem appends the chat message an input item (at param) stands for,
// or refuses the item. A reasoning item's text waits in reasoning for the
// assistant turn that follows it (a function call or an assistant
// message), whose reasoning_content it becomes; an item of another turn
// lets it go.
func addItem(msgs []provider.ChatMessage, item gjson.Result, param string, resolve Resolver, reasoning *string) ([]provider.ChatMessage, *oaierror.Error) {
	if !item.IsObject() {
		return msgs, invalid(param, "Each input item must be an object.")
	}
	if item.Get("type").String() == "item_reference" {
		var bad *oaierror.Error
		if item, bad = dereference(item, param, resolve); bad != nil {
			return msgs, bad
		}
	}
	pending := *reasoning
	*reasoning = ""
	switch typ := item.Get("type").String(); typ {
	case "", "message":
		m, bad := message(item, param)
		if bad != nil {
			return msgs, bad
		}
		if m.Role == "assistant" {
			m.ReasoningContent = pending
		}
		return append(msgs, m), nil
	case "function_call":
		msgs, bad := addFunctionCall(msgs, item, param)
		if bad == nil && pending != "" && msgs[len(msgs)-1].ReasoningContent == "" {
			msgs[len(msgs)-1].ReasoningContent = pending
		}
		return msgs, bad
	case "function_call_output":
		callID := item.Get("call_id").String()
		if callID == "" {
			return msgs, invalid(param, "A function_call_output item needs the call_id of its function_call.")
		}
		return append(msgs, provider.ChatMessage{Role: "tool", ToolCallID: callID, Content: content(outputText(item.Get("output")))}), nil
	case "reasoning":
		// A reasoning item of an earlier answer: its text (the reasoning
		// itself, else its summary) goes back with the assistant turn
		// that follows, for the servers that take it (DeepSeek's
		// reasoning_content); the others get none.
		*reasoning = reasoningText(item)
		return msgs, nil
	default:
		return msgs, unsupported(param+".type", fmt.Sprintf("input items of type %q are not served; use messages, function_call and function_call_output.", oaierror.Clip(typ, 60)))
	}
}

// reasoningText is a reasoning item's text: its content's reasoning_text
// parts, else its summary's text, joined.
func reasoningText(item gjson.Result) string {
	for _, field := range []string{"content", "summary"} {
		var b strings.Builder
		item.Get(field).ForEach(func(_, p gjson.Result) bool {
			b.WriteString(p.Get("text").String())
			return true
		})
		if b.Len() > 0 {
			return b.String()
		}
	}
	return ""
}

// dereference is the output item of a stored response an item_reference
// names: sent back by id (as the AI SDK does with store on), it is taken as
// if sent.
func dereference(item gjson.Result, param string, resolve Resolver) (gjson.Result, *oaierror.Error) {
	var raw json.RawMessage
	var bad *oaierror.Error
	if resolve != nil {
		raw, bad = resolve(item.Get("id").String())
	} else {
		bad = invalid(param+".id", "No stored response holds the item %q.", oaierror.Clip(item.Get("id").String(), 60))
	}
	if bad != nil {
		bad.Param = param + ".id"
		return gjson.Result{}, bad
	}
	return gjson.ParseBytes(raw), nil
}

// addFunctionCall appends a function_call item as a tool call: calls one
// after another are one assistant turn.
func addFunctionCall(msgs []provider.ChatMessage, item gjson.Result, param string) ([]provider.ChatMessage, *oaierror.Error) {
	callID, name := item.Get("call_id").String(), item.Get("name").String()
	if callID == "" || name == "" {
		return msgs, invalid(param, "A function_call item needs call_id and name.")
	}
	tc := provider.ToolCall{ID: callID, Type: "function",
		Function: provider.ToolFunction{Name: name, Arguments: item.Get("arguments").String()}}
	if n := len(msgs); n > 0 && msgs[n-1].Role == "assistant" {
		msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, tc)
		return msgs, nil
	}
	return append(msgs, provider.ChatMessage{Role: "assistant", ToolCalls: []provider.ToolCall{tc}}), nil
}

// outputText is a function_call_output's output as text: a string, or its
// parts' text joined.
func outputText(out gjson.Result) string {
	if !out.IsArray() {
		return out.String()
	}
	var parts []string
	out.ForEach(func(_, p gjson.Result) bool {
		parts = append(parts, p.Get("text").String())
		return true
	})
	return strings.Join(parts, "")
}

var roles = map[string]bool{"user": true, "assistant": true, "system": true, "developer": true}

// message turns a message item into a chat message.
func message(item gjson.Result, param string) (provider.ChatMessage, *oaierror.Error) {
	role := item.Get("role").String()
	if !roles[role] {
		return provider.ChatMessage{}, invalid(param+".role", "role must be user, assistant, system or developer.")
	}
	c := item.Get("content")
	if c.Type == gjson.String {
		return provider.ChatMessage{Role: role, Content: content(c.String())}, nil
	}
	if !c.IsArray() {
		return provider.ChatMessage{}, invalid(param+".content", "content must be a string or a list of content parts.")
	}
	var parts []map[string]any
	var texts []string // an assistant's or system's parts are text only
	var bad *oaierror.Error
	c.ForEach(func(j, p gjson.Result) bool {
		pp := fmt.Sprintf("%s.content[%d]", param, j.Int())
		switch typ := p.Get("type").String(); typ {
		case "input_text", "output_text", "text":
			parts = append(parts, map[string]any{"type": "text", "text": p.Get("text").String()})
			texts = append(texts, p.Get("text").String())
		case "refusal":
			texts = append(texts, p.Get("refusal").String())
			parts = append(parts, map[string]any{"type": "text", "text": p.Get("refusal").String()})
		case "input_image":
			url := p.Get("image_url").String()
			if url == "" {
				bad = unsupported(pp+".file_id", "images are taken by image_url (a URL or a data: URL), not by file id.")
				return false
			}
			img := map[string]any{"url": url}
			if d := p.Get("detail").String(); d != "" {
				img["detail"] = d
			}
			parts = append(parts, map[string]any{"type": "image_url", "image_url": img})
		default:
			bad = unsupported(pp+".type", fmt.Sprintf("content parts of type %q are not served; use input_text and input_image.", oaierror.Clip(typ, 60)))
		}
		return bad == nil
	})
	if bad != nil {
		return provider.ChatMessage{}, bad
	}
	if role != "user" {
		if len(texts) != len(parts) {
			return provider.ChatMessage{}, invalid(param+".content", "Only a user message may hold images.")
		}
		return provider.ChatMessage{Role: role, Content: content(strings.Join(texts, ""))}, nil
	}
	return provider.ChatMessage{Role: role, Content: content(parts)}, nil
}

// tools translates function tools and tool_choice.
func tools(root gjson.Result, chat map[string]any) *oaierror.Error {
	if v := root.Get("tools"); v.Exists() && v.Type != gjson.Null {
		if !v.IsArray() {
			return invalid("tools", "tools must be a list of function tools.")
		}
		var out []map[string]any
		var bad *oaierror.Error
		v.ForEach(func(i, t gjson.Result) bool {
			param := fmt.Sprintf("tools[%d]", i.Int())
			if typ := t.Get("type").String(); typ != "function" {
				bad = unsupported(param+".type", fmt.Sprintf("only function tools are served, not %q.", oaierror.Clip(typ, 60)))
				return false
			}
			if t.Get("name").String() == "" {
				bad = invalid(param+".name", "A function tool needs a name.")
				return false
			}
			fn := map[string]any{"name": t.Get("name").String()}
			if d := t.Get("description"); d.Exists() && d.Type != gjson.Null {
				fn["description"] = d.String()
			}
			if p := t.Get("parameters"); p.Exists() && p.Type != gjson.Null {
				fn["parameters"] = json.RawMessage(p.Raw)
			}
			if s := t.Get("strict"); s.Type == gjson.True || s.Type == gjson.False {
				fn["strict"] = s.Bool()
			}
			out = append(out, map[string]any{"type": "function", "function": fn})
			return true
		})
		if bad != nil {
			return bad
		}
		if len(out) > 0 {
			chat["tools"] = out
		}
	}
	if v := root.Get("tool_choice"); v.Exists() && v.Type != gjson.Null {
		switch {
		case v.Type == gjson.String && (v.String() == "auto" || v.String() == "none" || v.String() == "required"):
			chat["tool_choice"] = v.String()
		case v.IsObject() && v.Get("type").String() == "function" && v.Get("name").String() != "":
			chat["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": v.Get("name").String()}}
		default:
			return unsupported("tool_choice", "tool_choice must be auto, none, required or {\"type\":\"function\",\"name\":…}.")
		}
	}
	return nil
}

// textFormat translates text.format into response_format.
func textFormat(text gjson.Result, chat map[string]any) *oaierror.Error {
	if !text.Exists() || text.Type == gjson.Null {
		return nil
	}
	if !text.IsObject() {
		return invalid("text", "text must be an object such as {\"format\":{\"type\":\"text\"}}.")
	}
	f := text.Get("format")
	if !f.Exists() || f.Type == gjson.Null {
		return nil
	}
	switch f.Get("type").String() {
	case "text":
	case "json_object":
		chat["response_format"] = map[string]any{"type": "json_object"}
	case "json_schema":
		if f.Get("name").String() == "" || !f.Get("schema").IsObject() {
			return invalid("text.format", "A json_schema format needs a name and a schema.")
		}
		js := map[string]any{"name": f.Get("name").String(), "schema": json.RawMessage(f.Get("schema").Raw)}
		if d := f.Get("description"); d.Exists() && d.Type != gjson.Null {
			js["description"] = d.String()
		}
		if s := f.Get("strict"); s.Type == gjson.True || s.Type == gjson.False {
			js["strict"] = s.Bool()
		}
		chat["response_format"] = map[string]any{"type": "json_schema", "json_schema": js}
	default:
		return invalid("text.format.type", "text.format.type must be text, json_object or json_schema.")
	}
	return nil
}

// ChatParam names a chat parameter the way a Responses client knows it
// (for errors about a translated request).
func ChatParam(p string) string {
	switch {
	case p == "max_completion_tokens" || p == "max_tokens":
		return "max_output_tokens"
	case p == "reasoning_effort":
		return "reasoning.effort"
	case p == "response_format":
		return "text.format"
	case strings.HasPrefix(p, "messages"):
		return "input"
	}
	return p
}

// PreviousID is the body's previous_response_id, "" for none (or one that
// is not a string: ToChat refuses it).
func PreviousID(body []byte) string {
	v := gjson.GetBytes(body, "previous_response_id")
	if v.Type != gjson.String {
		return ""
	}
	return v.String()
}

// Resolver reads the output item an item_reference names.
type Resolver func(itemID string) (json.RawMessage, *oaierror.Error)

// ItemOf splits an output item's id into its response's id and its index
// in that response's output: item ids are made that way (see Answer), so a
// reference needs no index of its own.
func ItemOf(itemID string) (responseID string, index int, ok bool) {
	_, rest, found := strings.Cut(itemID, "_")
	if !found || !(strings.HasPrefix(itemID, "msg_") || strings.HasPrefix(itemID, "fc_") || strings.HasPrefix(itemID, "rs_")) {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '_')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(rest[i+1:])
	if err != nil || n < 0 {
		return "", 0, false
	}
	return IDPrefix + rest[:i], n, true
}
