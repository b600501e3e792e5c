package e2e

import "net/http"

// Anthropic's Messages API (POST /v1/messages, x-api-key and
// anthropic-version headers): a message with content blocks, or a stream of
// named events — message_start (input tokens), content_block_start/
// delta/stop (text_delta, input_json_delta), ping, message_delta (stop
// reason, output tokens), message_stop — or an error event midway.

const anthropicModel = "claude-sonnet-4-5-20250929"

// anthropicUsage reports mockUsage["anthropic"] as Anthropic does: input
// tokens apart from cached ones.
func anthropicUsage(output int64) map[string]any {
	return map[string]any{"input_tokens": 20, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 5, "output_tokens": output}
}

func (m *mockProvider) serveAnthropic(w http.ResponseWriter, stream, tools, failMidStream bool) {
	ids := mockToolIDs["anthropic"]
	output := mockUsage["anthropic"][1]
	if !stream {
		content := []any{map[string]any{"type": "text", "text": mockFullText()}}
		stop := "end_turn"
		if tools {
			content = []any{map[string]any{"type": "text", "text": "Let me check."}}
			for i, c := range mockToolCalls {
				var input any = map[string]any{}
				if c.name == "get_weather" {
					input = map[string]any{"city": "Paris"}
				}
				content = append(content, map[string]any{"type": "tool_use", "id": ids[i], "name": c.name, "input": input})
			}
			stop = "tool_use"
		}
		writeJSON(w, map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "model": anthropicModel,
			"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(output)})
		return
	}
	s := newSSE(w, "\n")
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "content": []any{}, "model": anthropicModel,
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(1)}})
	s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "text", "text": ""}})
	s.event("ping", `{"type": "ping"}`)
	text := func(t string) {
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": t}})
	}
	if failMidStream {
		text(mockText[0])
		text(mockText[1])
		s.event("error", `{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}`)
		return
	}
	stop := "end_turn"
	if tools {
		text("Let me check.")
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		for i, c := range mockToolCalls {
			block := i + 1
			s.event("content_block_start", map[string]any{"type": "content_block_start", "index": block,
				"content_block": map[string]any{"type": "tool_use", "id": ids[i], "name": c.name, "input": map[string]any{}}})
			s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
			for _, frag := range c.args {
				s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
					"delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
			}
			s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
		}
		stop = "tool_use"
	} else {
		for _, piece := range mockText {
			text(piece)
		}
		s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	}
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": output}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}

// mockStructured is the structured answer the Anthropic mock gives through
// the forced json_answer tool, and the fragments it streams it in.
var mockStructured = []string{`{"city": "Par`, `is", "temp`, `erature": 21}`}

// serveAnthropicStructured answers a request whose tool_choice forces the
// json_answer tool, as Claude does: one tool_use block with the answer as
// its input (streamed as input_json_delta fragments), stop_reason tool_use.
func (m *mockProvider) serveAnthropicStructured(w http.ResponseWriter, stream bool) {
	output := mockUsage["anthropic"][1]
	if !stream {
		writeJSON(w, map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "model": anthropicModel,
			"content": []any{map[string]any{"type": "tool_use", "id": "toolu_01S", "name": "json_answer",
				"input": map[string]any{"city": "Paris", "temperature": 21}}},
			"stop_reason": "tool_use", "stop_sequence": nil, "usage": anthropicUsage(output)})
		return
	}
	s := newSSE(w, "\n")
	s.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "content": []any{}, "model": anthropicModel,
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(1)}})
	s.event("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
		"content_block": map[string]any{"type": "tool_use", "id": "toolu_01S", "name": "json_answer", "input": map[string]any{}}})
	for _, frag := range mockStructured {
		s.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
	}
	s.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": "tool_use", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": output}})
	s.event("message_stop", map[string]any{"type": "message_stop"})
}
