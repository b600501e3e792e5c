package responses

import (
	"encoding/json"
	"fmt"

	"github.com/tidwall/gjson"
)

// FromChat writes the Responses request a chat request (one ToChat made,
// its conversation whole) stands for, for a server that speaks the
// Responses API: model is the deployment's. The request asks the server to
// store nothing (store: false): Tollgate keeps the state, so that
// previous_response_id and item references work on every deployment alike.
func FromChat(chat []byte, model string) ([]byte, error) {
	if !gjson.ValidBytes(chat) {
		return nil, fmt.Errorf("responses: the chat request is not JSON")
	}
	c := gjson.ParseBytes(chat)
	out := map[string]any{"model": model, "store": false}
	input, err := inputFromChat(c.Get("messages"))
	if err != nil {
		return nil, err
	}
	out["input"] = input
	if c.Get("stream").Bool() {
		out["stream"] = true
	}
	settingsFromChat(c, out)
	if tools := c.Get("tools"); tools.IsArray() {
		out["tools"] = toolsFromChat(tools)
	}
	switch tc := c.Get("tool_choice"); {
	case tc.Type == gjson.String:
		out["tool_choice"] = tc.String()
	case tc.IsObject():
		out["tool_choice"] = map[string]any{"type": "function", "name": tc.Get("function.name").String()}
	}
	if f := formatFromChat(c.Get("response_format")); f != nil {
		out["text"] = map[string]any{"format": f}
	}
	return json.Marshal(out)
}

// inputFromChat is the Responses input items a chat conversation's
// messages stand for; a message of a role Responses has no place for is an
// error.
func inputFromChat(messages gjson.Result) ([]any, error) {
	var input []any
	var bad error
	messages.ForEach(func(_, m gjson.Result) bool {
		role := m.Get("role").String()
		content := m.Get("content")
		switch role {
		case "tool":
			input = append(input, map[string]any{"type": "function_call_output", "call_id": m.Get("tool_call_id").String(), "output": textOf(content)})
		case "assistant":
			input = append(input, assistantItems(m)...)
		case "user", "system", "developer":
			input = append(input, messageItem(role, content))
		default:
			bad = fmt.Errorf("responses: a chat message of role %q", role)
			return false
		}
		return true
	})
	return input, bad
}

// assistantItems is an assistant chat message as Responses items: its text
// as an output message (if any), then one function_call per tool call.
func assistantItems(m gjson.Result) []any {
	var items []any
	if t := textOf(m.Get("content")); t != "" {
		items = append(items, map[string]any{"type": "message", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": t}}})
	}
	m.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		items = append(items, map[string]any{"type": "function_call", "call_id": tc.Get("id").String(),
			"name": tc.Get("function.name").String(), "arguments": tc.Get("function.arguments").String()})
		return true
	})
	return items
}

// messageItem is a user, system or developer chat message as a Responses
// input message: a string content stays a string; parts become input_text
// and input_image parts (other part types are dropped).
func messageItem(role string, content gjson.Result) map[string]any {
	if content.Type == gjson.String {
		return map[string]any{"type": "message", "role": role, "content": content.String()}
	}
	var parts []any
	content.ForEach(func(_, p gjson.Result) bool {
		switch p.Get("type").String() {
		case "text":
			parts = append(parts, map[string]any{"type": "input_text", "text": p.Get("text").String()})
		case "image_url":
			img := map[string]any{"type": "input_image", "image_url": p.Get("image_url.url").String(), "detail": "auto"}
			if d := p.Get("image_url.detail").String(); d != "" {
				img["detail"] = d
			}
			parts = append(parts, img)
		}
		return true
	})
	return map[string]any{"type": "message", "role": role, "content": parts}
}

// settingsFromChat copies the chat request's sampling settings, output
// limit and reasoning effort into out under their Responses names.
func settingsFromChat(c gjson.Result, out map[string]any) {
	for _, name := range [...]string{"temperature", "top_p", "parallel_tool_calls", "user"} {
		if v := c.Get(name); v.Exists() && v.Type != gjson.Null {
			out[name] = json.RawMessage(v.Raw)
		}
	}
	// The output limit: the smaller of the chat request's two (the
	// upstream step leaves it one, the held one).
	for _, name := range [...]string{"max_completion_tokens", "max_tokens"} {
		if v := c.Get(name); v.Type == gjson.Number {
			if prev, ok := out["max_output_tokens"].(json.RawMessage); !ok || gjson.ParseBytes(prev).Num > v.Num {
				out["max_output_tokens"] = json.RawMessage(v.Raw)
			}
		}
	}
	if v := c.Get("reasoning_effort"); v.Exists() && v.Type != gjson.Null {
		out["reasoning"] = map[string]any{"effort": json.RawMessage(v.Raw)}
	}
}

// toolsFromChat is the chat request's function tools as Responses tools.
func toolsFromChat(tools gjson.Result) []any {
	var list []any
	tools.ForEach(func(_, t gjson.Result) bool {
		fn := map[string]any{"type": "function", "name": t.Get("function.name").String()}
		if d := t.Get("function.description"); d.Exists() {
			fn["description"] = d.String()
		}
		if p := t.Get("function.parameters"); p.Exists() {
			fn["parameters"] = json.RawMessage(p.Raw)
		}
		fn["strict"] = t.Get("function.strict").Bool()
		list = append(list, fn)
		return true
	})
	return list
}

// formatFromChat is the Responses text.format a chat response_format
// stands for, or nil when it asks for none.
func formatFromChat(rf gjson.Result) map[string]any {
	switch rf.Get("type").String() {
	case "json_object":
		return map[string]any{"type": "json_object"}
	case "json_schema":
		f := map[string]any{"type": "json_schema", "name": rf.Get("json_schema.name").String(),
			"schema": json.RawMessage(rf.Get("json_schema.schema").Raw)}
		if s := rf.Get("json_schema.strict"); s.Exists() {
			f["strict"] = s.Bool()
		}
		if d := rf.Get("json_schema.description"); d.Exists() {
			f["description"] = d.String()
		}
		return f
	}
	return nil
}

// textOf is a chat content's text: the string, or its text parts joined.
func textOf(content gjson.Result) string {
	if content.Type == gjson.String {
		return content.String()
	}
	var s string
	content.ForEach(func(_, p gjson.Result) bool {
		s += p.Get("text").String()
		return true
	})
	return s
}
