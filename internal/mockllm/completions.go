package mockllm

import (
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"
)

// The bounds of a legacy completions request: OpenAI's default max_tokens,
// its largest n, and the mock's own bound on the choices of one answer
// (prompts × n).
const (
	defaultCompletionTokens = 16
	maxN                    = 128
	maxChoices              = 128
)

// prompt is one prompt of a legacy completions request: a text, or (when
// tokens is not nil) a token array.
type prompt = embedItem

// completionPrompts reads OpenAI's prompt: a string, an array of strings,
// one token array, or an array of token arrays (the same kinds as an
// embeddings input, but an empty string is a prompt).
func completionPrompts(v any) ([]prompt, string) {
	if s, ok := v.(string); ok {
		return []prompt{{text: s}}, ""
	}
	items, msg := embeddingItems(nonEmpty(v))
	if msg != "" {
		return nil, strings.ReplaceAll(msg, "input", "prompt")
	}
	texts, _ := v.([]any)
	for i := range items {
		if items[i].tokens == nil {
			items[i].text, _ = texts[i].(string)
		}
	}
	return items, ""
}

// nonEmpty is v with each empty string of an array replaced by a space,
// so that embeddingItems accepts it.
func nonEmpty(v any) any {
	vs, ok := v.([]any)
	if !ok {
		return v
	}
	out := make([]any, len(vs))
	for i, e := range vs {
		if e == "" {
			e = " "
		}
		out[i] = e
	}
	return out
}

// stops are a request's stop sequences (a string or an array of them).
func stops(v any) []string {
	if s, ok := v.(string); ok && s != "" {
		return []string{s}
	}
	var out []string
	vs, _ := v.([]any)
	for _, e := range vs {
		if s, ok := e.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// completion is one choice of a legacy completions answer.
type completion struct {
	pieces []string
	finish string
}

// complete is the answer to one prompt: Options.Answer, or the
// deterministic text for the prompt's text (the greeting for a token
// array), cut at max_tokens tokens as the mock counts them (and at the
// mock's own bound) — finish "length" — or before the first stop sequence
// — finish "stop".
func (m *Mock) complete(p prompt, limit int, stop []string) completion {
	text := m.opt.Answer
	if len(text) == 0 {
		text = pieces(demoText(p.text))
	}
	b := &budget{left: min(maxAnswerRunes, 4*limit)}
	c := completion{pieces: b.pieces(text), finish: "stop"}
	if b.cut {
		c.finish = "length"
	}
	joined := strings.Join(c.pieces, "")
	at := -1
	for _, s := range stop {
		if i := strings.Index(joined, s); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at >= 0 {
		c.finish = "stop"
		var kept []string
		for _, piece := range c.pieces {
			if at <= 0 {
				break
			}
			if len(piece) > at {
				piece = piece[:at]
			}
			kept = append(kept, piece)
			at -= len(piece)
		}
		c.pieces = kept
	}
	return c
}

func (c completion) text() string { return strings.Join(c.pieces, "") }

// completions answers OpenAI's (and Azure's) legacy completions: one
// choice per prompt and n (index prompt×n + j), each the deterministic
// answer cut at max_tokens (16 when absent), with the prompt before it
// when echo; whole, or streamed as text_completion chunks, a chunk with
// each choice's finish reason, a usage chunk with stream_options
// .include_usage, and [DONE]. Prompt tokens are counted once per prompt
// (a token array's length), completion tokens over every choice
// (Options.Usage, when set, is reported instead). OpenAI's refusals are
// 400s: no prompt or an empty array, n outside 1..128, max_tokens below 0;
// and more than 128 choices in all, a bound of the mock's own.
func (m *Mock) completions(w http.ResponseWriter, r *http.Request, req *Request, f Fault) {
	p := f.Play
	b := req.Body
	if _, ok := b["prompt"]; !ok {
		m.refuse(w, req.Format, "prompt", "'prompt' is a required property")
		return
	}
	prompts, msg := completionPrompts(b["prompt"])
	if msg != "" {
		m.refuse(w, req.Format, "prompt", msg)
		return
	}
	n, ok := intField(b, "n", 1, 1, maxN)
	if !ok {
		m.refuse(w, req.Format, "n", fmt.Sprintf("Invalid value for 'n': %s. It must be an integer from 1 to %d.", mustJSON(b["n"]), maxN))
		return
	}
	limit, ok := intField(b, "max_tokens", defaultCompletionTokens, 0, 1<<30)
	if !ok {
		m.refuse(w, req.Format, "max_tokens", fmt.Sprintf("Invalid value for 'max_tokens': %s. It must be an integer of at least 0.", mustJSON(b["max_tokens"])))
		return
	}
	if len(prompts)*n > maxChoices {
		m.refuse(w, req.Format, "n", fmt.Sprintf("%d prompts × n = %d choices, more than the mock's %d.", len(prompts), len(prompts)*n, maxChoices))
		return
	}
	echo, _ := b["echo"].(bool)
	stop := stops(b["stop"])
	usage := Usage{}
	var choices []completion
	for _, pr := range prompts {
		usage.Prompt += pr.count(req)
		for range n {
			c := m.complete(pr, limit, stop)
			usage.Completion += tokens(utf8.RuneCountInString(c.text()))
			if echo && pr.tokens == nil && pr.text != "" {
				c.pieces = append([]string{pr.text}, c.pieces...)
			}
			choices = append(choices, c)
		}
	}
	if m.opt.Usage != nil {
		usage = *m.opt.Usage
	}
	whole, s := completionAnswer(req, choices, usage)
	if stream, _ := b["stream"].(bool); stream {
		m.play(w, r, s, f)
		return
	}
	writeWhole(w, whole, p)
}

// completionAnswer is a legacy completions answer, whole and streamed; an
// Azure one carries Azure's content-filter annotations when whole.
func completionAnswer(req *Request, choices []completion, u Usage) (any, stream) {
	id, model := "cmpl-mock"+string(req.Format), modelOf(req)
	includeUsage, _ := object(req.Body["stream_options"])["include_usage"].(bool)
	usage := map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion}
	answer := func(choices []any) map[string]any {
		return map[string]any{"id": id, "object": "text_completion", "created": created, "model": model,
			"system_fingerprint": "fp_mock", "choices": choices}
	}
	var all []any
	for i, c := range choices {
		choice := map[string]any{"text": c.text(), "index": i, "logprobs": nil, "finish_reason": c.finish}
		if req.Format == Azure {
			choice["content_filter_results"] = azureFilterResults
		}
		all = append(all, choice)
	}
	whole := answer(all)
	whole["usage"] = usage
	if req.Format == Azure {
		whole["prompt_filter_results"] = []any{map[string]any{"prompt_index": 0, "content_filter_results": azureFilterResults}}
	}

	bld := &builder{stream: stream{format: req.Format}}
	chunk := func(i int, text string, finish any) map[string]any {
		c := answer([]any{map[string]any{"text": text, "index": i, "logprobs": nil, "finish_reason": finish}})
		if includeUsage {
			c["usage"] = nil
		}
		return c
	}
	for i, c := range choices {
		for _, piece := range c.pieces {
			bld.piece("", chunk(i, piece, nil))
		}
		bld.add("", chunk(i, "", c.finish))
	}
	if includeUsage {
		u := answer([]any{})
		u["usage"] = usage
		bld.add("", u)
	}
	bld.add("", "[DONE]")
	return whole, bld.done()
}
