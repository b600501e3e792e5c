package mockllm

import "fmt"

// created is every answer's creation time: answers are the same for the
// same request.
const created = 1750000000

// builder collects a stream's events and marks where its first pieces
// end: after the second piece of text or of arguments.
type builder struct {
	stream
	pieces int
}

func (b *builder) add(name string, data any) { b.events = append(b.events, sse(b.format, name, data)) }

// piece adds an event that carries a piece of the answer.
func (b *builder) piece(name string, data any) {
	b.add(name, data)
	if b.pieces++; b.pieces == 2 {
		b.first = len(b.events)
	}
}

func (b *builder) done() stream {
	if b.pieces < 2 {
		b.first = len(b.events)
	}
	return b.stream
}

// azureFilterResults is Azure's content-filter verdict on a prompt or a
// choice.
var azureFilterResults = map[string]any{
	"hate":      map[string]any{"filtered": false, "severity": "safe"},
	"self_harm": map[string]any{"filtered": false, "severity": "safe"},
	"sexual":    map[string]any{"filtered": false, "severity": "safe"},
	"violence":  map[string]any{"filtered": false, "severity": "safe"},
}

// ToolCallID is the id of an answer's i-th tool call in format f (the
// call_id in OpenAI's Responses API); Gemini's calls have none.
func ToolCallID(f Format, i int) string {
	switch f {
	case Anthropic:
		return fmt.Sprintf("toolu_mock%d", i)
	case Gemini:
		return ""
	}
	return fmt.Sprintf("call_%s%d", f, i)
}

// chat is OpenAI's chat-completions answer, with Azure's content-filter
// annotations when azure.
func chat(a asked, rep reply, azure bool) (any, stream) {
	f := OpenAI
	if azure {
		f = Azure
	}
	id := "chatcmpl-mock" + string(f)
	usage := map[string]any{"prompt_tokens": rep.usage.Prompt, "completion_tokens": rep.usage.Completion,
		"total_tokens": rep.usage.Prompt + rep.usage.Completion}
	msg := map[string]any{"role": "assistant", "content": rep.text(), "refusal": nil}
	finish := "stop"
	if len(rep.calls) > 0 {
		var calls []any
		for i, c := range rep.calls {
			calls = append(calls, map[string]any{"id": ToolCallID(f, i), "type": "function",
				"function": map[string]any{"name": c.name, "arguments": c.arguments()}})
		}
		msg = map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": calls}
		finish = "tool_calls"
	}
	if rep.cut {
		finish = "length"
	}
	choice := map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}
	whole := map[string]any{"id": id, "object": "chat.completion", "created": created, "model": a.model,
		"choices": []any{choice}, "usage": usage, "system_fingerprint": "fp_mock"}
	if azure {
		// Azure (older api-versions) omits logprobs and refusal, and
		// annotates the prompt and each choice.
		delete(choice, "logprobs")
		delete(msg, "refusal")
		choice["content_filter_results"] = azureFilterResults
		whole["prompt_filter_results"] = []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults}}
	}
	return whole, chatStream(a, rep, f, usage, finish)
}

func chatStream(a asked, rep reply, f Format, usage map[string]any, finish string) stream {
	azure := f == Azure
	id := "chatcmpl-mock" + string(f)
	chunk := func(delta map[string]any, finish any) map[string]any {
		choice := map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}
		if azure {
			choice["content_filter_results"] = map[string]any{}
		}
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"system_fingerprint": "fp_mock", "choices": []any{choice}}
		if a.includeUsage {
			c["usage"] = nil
		}
		return c
	}
	b := &builder{stream: stream{format: f}}
	if azure {
		b.add("", map[string]any{"choices": []any{}, "created": 0, "id": "", "model": "", "object": "",
			"prompt_filter_results": []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults}}})
	}
	if len(rep.calls) > 0 {
		b.add("", chunk(map[string]any{"role": "assistant", "content": nil, "refusal": nil}, nil))
		for i, c := range rep.calls {
			for j, frag := range c.args {
				call := map[string]any{"index": i, "function": map[string]any{"arguments": frag}}
				if j == 0 {
					call = map[string]any{"index": i, "id": ToolCallID(f, i), "type": "function",
						"function": map[string]any{"name": c.name, "arguments": frag}}
				}
				b.piece("", chunk(map[string]any{"tool_calls": []any{call}}, nil))
			}
		}
	} else {
		b.add("", chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
		for _, piece := range rep.pieces {
			b.piece("", chunk(map[string]any{"content": piece}, nil))
			if azure && b.pieces == 2 {
				// An asynchronous content-filter annotation: not a chunk.
				b.add("", map[string]any{"choices": []any{map[string]any{"index": 0, "finish_reason": nil,
					"content_filter_offsets": map[string]any{"check_offset": 0, "start_offset": 0, "end_offset": 10},
					"content_filter_results": azureFilterResults}}, "created": 0, "id": "", "model": "", "object": ""})
			}
		}
	}
	last := chunk(map[string]any{}, finish)
	if a.usageInLast {
		last["usage"] = usage
	}
	b.add("", last)
	if a.includeUsage {
		b.add("", map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": a.model,
			"system_fingerprint": "fp_mock", "choices": []any{}, "usage": usage})
	}
	b.add("", "[DONE]")
	return b.done()
}
