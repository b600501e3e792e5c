package mockllm

import "encoding/json"

// GeminiResponseID is every Gemini answer's responseId. Gemini's function
// calls have no ids; Tollgate makes them from this and the call's number.
const GeminiResponseID = "mockGeminiResponse"

// geminiUsage reports usage as Gemini does: the answer's tokens apart from
// the thinking ones.
func geminiUsage(prompt, candidates, thoughts int) map[string]any {
	u := map[string]any{"promptTokenCount": prompt, "candidatesTokenCount": candidates, "totalTokenCount": prompt + candidates + thoughts}
	if thoughts > 0 {
		u["thoughtsTokenCount"] = thoughts
	}
	return u
}

// geminiOptions are the generationConfig fields the mock honours:
// candidateCount (that many identical candidates) and responseLogprobs
// (a logprobsResult per candidate: each text part one token, with
// logProbability -0.25, and a second-best "<alt>" at -2.5).
type geminiOptions struct {
	candidates int
	logprobs   bool
}

func geminiOptionsOf(body map[string]any) geminiOptions {
	gc := object(body["generationConfig"])
	o := geminiOptions{candidates: 1}
	if n, ok := gc["candidateCount"].(float64); ok && n > 1 {
		o.candidates = min(int(n), 8)
	}
	o.logprobs, _ = gc["responseLogprobs"].(bool)
	return o
}

func geminiCalls(rep reply) []any {
	var parts []any
	for _, c := range rep.calls {
		var args any
		if err := json.Unmarshal([]byte(c.arguments()), &args); err != nil {
			args = map[string]any{}
		}
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.name, "args": args}})
	}
	return parts
}

func geminiAnswer(a asked, parts []any, finish string, usage map[string]any, opt geminiOptions) map[string]any {
	var candidates []any
	for i := 0; i < opt.candidates; i++ {
		candidate := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": i}
		if finish != "" {
			candidate["finishReason"] = finish
		}
		if opt.logprobs {
			candidate["logprobsResult"] = geminiLogprobs(parts)
		}
		candidates = append(candidates, candidate)
	}
	return map[string]any{"candidates": candidates, "usageMetadata": usage, "modelVersion": a.model, "responseId": GeminiResponseID}
}

func geminiLogprobs(parts []any) map[string]any {
	var chosen, top []any
	for _, p := range parts {
		part := p.(map[string]any)
		if text, _ := part["text"].(string); text != "" && part["thought"] != true {
			tok := map[string]any{"token": text, "tokenId": 7, "logProbability": -0.25}
			chosen = append(chosen, tok)
			top = append(top, map[string]any{"candidates": []any{tok,
				map[string]any{"token": "<alt>", "tokenId": 8, "logProbability": -2.5}}})
		}
	}
	return map[string]any{"chosenCandidates": chosen, "topCandidates": top}
}

// gemini is generateContent's answer, or streamGenerateContent's events:
// each a whole candidate piece with the running usageMetadata; function
// calls come whole. A quarter of the completion is thinking: the whole
// answer begins with a thought part, and its text carries a signature.
func gemini(a asked, rep reply, opt geminiOptions) (any, stream) {
	thoughts := rep.usage.Completion / 4
	full := geminiUsage(rep.usage.Prompt, rep.usage.Completion-thoughts, thoughts)
	parts := []any{map[string]any{"text": rep.text(), "thoughtSignature": "CiQB0e2Kb6Yk"}}
	if thoughts > 0 {
		parts = append([]any{map[string]any{"text": "**Thinking about the question**", "thought": true}}, parts...)
	}
	if len(rep.calls) > 0 {
		parts = geminiCalls(rep)
	}
	stop := "STOP"
	if rep.cut {
		stop = "MAX_TOKENS"
	}
	whole := geminiAnswer(a, parts, stop, full, opt)
	b := &builder{stream: stream{format: Gemini}}
	if len(rep.calls) > 0 {
		if !rep.forced {
			b.piece("", geminiAnswer(a, []any{map[string]any{"text": preamble}}, "", geminiUsage(rep.usage.Prompt, 3, 0), geminiOptions{candidates: 1}))
		}
		b.piece("", geminiAnswer(a, geminiCalls(rep), stop, full, geminiOptions{candidates: 1}))
		return whole, b.done()
	}
	pieces := rep.pieces
	if len(pieces) == 0 {
		pieces = []string{""}
	}
	for i, piece := range pieces {
		finish, usage := "", geminiUsage(rep.usage.Prompt, min(i+1, rep.usage.Completion), 0)
		if i == len(pieces)-1 {
			finish, usage = stop, full
		}
		b.piece("", geminiAnswer(a, []any{map[string]any{"text": piece}}, finish, usage, opt))
	}
	return whole, b.done()
}
