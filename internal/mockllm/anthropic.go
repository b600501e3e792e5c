package mockllm

import "encoding/json"

// anthropicUsage reports usage as Anthropic does: input tokens apart from
// those read from the cache (a fifth of the prompt here).
func anthropicUsage(u Usage, output int) map[string]any {
	cached := u.Prompt / 5
	return map[string]any{"input_tokens": u.Prompt - cached, "cache_creation_input_tokens": 0,
		"cache_read_input_tokens": cached, "output_tokens": output}
}

// preamble is the text Anthropic's and Gemini's models say before calling
// tools they chose themselves.
const preamble = "Let me check."

// thought and thoughtSignature are the thinking block of a request that
// enables extended thinking.
const (
	thought          = "The user wants an answer; I will give it."
	thoughtSignature = "EqQBCgIYAhIMmocksignature"
)

// anthropic is the Messages API's answer: a message with content blocks,
// or a stream of named events — message_start (input tokens),
// content_block_start/delta/stop (thinking_delta and signature_delta when
// the request enables thinking, text_delta, input_json_delta), ping,
// message_delta (stop reason, output tokens), message_stop.
func anthropic(a asked, rep reply) (any, stream) {
	var content []any
	if a.thinking {
		content = append(content, map[string]any{"type": "thinking", "thinking": thought, "signature": thoughtSignature})
	}
	stop := "end_turn"
	if len(rep.calls) == 0 {
		content = append(content, map[string]any{"type": "text", "text": rep.text()})
	} else {
		if !rep.forced {
			content = append(content, map[string]any{"type": "text", "text": preamble})
		}
		for i, c := range rep.calls {
			var input any
			if err := json.Unmarshal([]byte(c.arguments()), &input); err != nil {
				input = map[string]any{}
			}
			content = append(content, map[string]any{"type": "tool_use", "id": ToolCallID(Anthropic, i), "name": c.name, "input": input})
		}
		stop = "tool_use"
	}
	if rep.cut {
		stop = "max_tokens"
	}
	whole := map[string]any{"id": "msg_mock", "type": "message", "role": "assistant", "model": a.model,
		"content": content, "stop_reason": stop, "stop_sequence": nil, "usage": anthropicUsage(rep.usage, rep.usage.Completion)}
	return whole, anthropicStream(a, rep, stop)
}

func anthropicStream(a asked, rep reply, stop string) stream {
	b := &builder{stream: stream{format: Anthropic}}
	b.add("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_mock", "type": "message", "role": "assistant", "content": []any{}, "model": a.model,
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(rep.usage, 1)}})
	block := 0
	if a.thinking {
		b.add("content_block_start", map[string]any{"type": "content_block_start", "index": block,
			"content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		b.add("ping", `{"type": "ping"}`)
		b.piece("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
			"delta": map[string]any{"type": "thinking_delta", "thinking": thought}})
		b.add("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
			"delta": map[string]any{"type": "signature_delta", "signature": thoughtSignature}})
		b.add("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
		block++
	}
	text := func(pieces []string) {
		b.add("content_block_start", map[string]any{"type": "content_block_start", "index": block,
			"content_block": map[string]any{"type": "text", "text": ""}})
		if block == 0 {
			b.add("ping", `{"type": "ping"}`)
		}
		for _, t := range pieces {
			b.piece("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
				"delta": map[string]any{"type": "text_delta", "text": t}})
		}
		b.add("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
		block++
	}
	if len(rep.calls) == 0 {
		text(rep.pieces)
	} else if !rep.forced {
		text([]string{preamble})
	}
	for i, c := range rep.calls {
		b.add("content_block_start", map[string]any{"type": "content_block_start", "index": block,
			"content_block": map[string]any{"type": "tool_use", "id": ToolCallID(Anthropic, i), "name": c.name, "input": map[string]any{}}})
		b.add("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, frag := range c.args {
			b.piece("content_block_delta", map[string]any{"type": "content_block_delta", "index": block,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": frag}})
		}
		b.add("content_block_stop", map[string]any{"type": "content_block_stop", "index": block})
		block++
	}
	b.add("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": rep.usage.Completion}})
	b.add("message_stop", map[string]any{"type": "message_stop"})
	return b.done()
}
