package mockllm

import "fmt"

// responses is OpenAI's Responses API answer: a response object, or its
// stream's events, with item ids of the server's own. An answer cut at its
// output limit is incomplete (reason max_output_tokens), as are its items,
// and its stream ends with response.incomplete.
func responses(a asked, rep reply) (any, stream) {
	status, details, final := "completed", any(nil), "response.completed"
	if rep.cut {
		status, details, final = "incomplete", map[string]any{"reason": "max_output_tokens"}, "response.incomplete"
	}
	u := rep.usage
	usage := map[string]any{"input_tokens": u.Prompt, "input_tokens_details": map[string]any{"cached_tokens": 0, "cache_write_tokens": 0},
		"output_tokens": u.Completion, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens": u.Prompt + u.Completion}
	var output []any
	for i, c := range rep.calls {
		output = append(output, map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_mock%d", i),
			"call_id": ToolCallID(OpenAI, i), "name": c.name, "arguments": c.arguments(), "status": status})
	}
	if len(rep.calls) == 0 {
		output = []any{map[string]any{"type": "message", "id": "msg_mock0", "role": "assistant", "status": status,
			"content": []any{map[string]any{"type": "output_text", "text": rep.text(), "annotations": []any{}, "logprobs": []any{}}}}}
	}
	response := func(status string, out []any, u any) map[string]any {
		incomplete := any(nil)
		if status == "incomplete" {
			incomplete = details
		}
		return map[string]any{"id": "resp_mock", "object": "response", "created_at": created, "status": status,
			"model": a.model, "output": out, "usage": u, "error": nil, "incomplete_details": incomplete, "instructions": nil,
			"metadata": map[string]any{}, "parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0, "tool_choice": "auto",
			"tools": []any{}, "store": false, "text": map[string]any{"format": map[string]any{"type": "text"}}}
	}
	b := &builder{stream: stream{format: OpenAI}}
	seq := 0
	ev := func(typ string, fields map[string]any, piece bool) {
		fields["type"], fields["sequence_number"] = typ, seq
		seq++
		if piece {
			b.piece(typ, fields)
		} else {
			b.add(typ, fields)
		}
	}
	ev("response.created", map[string]any{"response": response("in_progress", []any{}, nil)}, false)
	ev("response.in_progress", map[string]any{"response": response("in_progress", []any{}, nil)}, false)
	for i, it := range output {
		responsesItem(ev, i, it.(map[string]any), rep)
	}
	ev(final, map[string]any{"response": response(status, output, usage)}, false)
	return response(status, output, usage), b.done()
}

// responsesItem streams one output item.
func responsesItem(ev func(string, map[string]any, bool), i int, item map[string]any, rep reply) {
	id := item["id"].(string)
	switch item["type"] {
	case "message":
		ev("response.output_item.added", map[string]any{"output_index": i, "item": map[string]any{"type": "message", "id": id,
			"role": "assistant", "status": "in_progress", "content": []any{}}}, false)
		ev("response.content_part.added", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}, "logprobs": []any{}}}, false)
		for _, word := range rep.pieces {
			ev("response.output_text.delta", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "delta": word,
				"logprobs": []any{}}, true)
		}
		ev("response.output_text.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0, "text": rep.text(),
			"logprobs": []any{}}, false)
		ev("response.content_part.done", map[string]any{"item_id": id, "output_index": i, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": rep.text(), "annotations": []any{}, "logprobs": []any{}}}, false)
	case "function_call":
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["arguments"], added["status"] = "", "in_progress"
		ev("response.output_item.added", map[string]any{"output_index": i, "item": added}, false)
		for _, frag := range rep.calls[i].args {
			ev("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": frag}, true)
		}
		ev("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "name": item["name"],
			"arguments": item["arguments"]}, false)
	}
	ev("response.output_item.done", map[string]any{"output_index": i, "item": item}, false)
}
