package e2e

import "net/http"

// Gemini's generateContent (POST /v1beta/models/{model}:generateContent)
// and streamGenerateContent?alt=sse, with an x-goog-api-key header. Stream
// events are separated by CRLF; each carries a whole candidate piece and
// the running usageMetadata; function calls come whole, without ids.

const (
	geminiModel      = "gemini-2.5-flash"
	geminiPath       = "/v1beta/models/" + geminiModel + ":generateContent"
	geminiStreamPath = "/v1beta/models/" + geminiModel + ":streamGenerateContent"
)

// geminiUsage reports mockUsage["gemini"] as Gemini does: the answer's
// tokens apart from the thinking ones.
func geminiUsage(candidates, thoughts int64) map[string]any {
	u := map[string]any{"promptTokenCount": 8, "candidatesTokenCount": candidates, "totalTokenCount": 8 + candidates + thoughts}
	if thoughts > 0 {
		u["thoughtsTokenCount"] = thoughts
	}
	return u
}

func geminiCalls() []any {
	var parts []any
	for _, c := range mockToolCalls {
		var args any = map[string]any{}
		if c.name == "get_weather" {
			args = map[string]any{"city": "Paris"}
		}
		parts = append(parts, map[string]any{"functionCall": map[string]any{"name": c.name, "args": args}})
	}
	return parts
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
	gc, _ := body["generationConfig"].(map[string]any)
	o := geminiOptions{candidates: 1}
	if n, ok := gc["candidateCount"].(float64); ok && n > 1 {
		o.candidates = int(n)
	}
	o.logprobs, _ = gc["responseLogprobs"].(bool)
	return o
}

func geminiAnswer(parts []any, finish string, usage map[string]any, o ...geminiOptions) map[string]any {
	opt := geminiOptions{candidates: 1}
	if len(o) > 0 {
		opt = o[0]
	}
	var candidates []any
	for i := 0; i < opt.candidates; i++ {
		candidate := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": i}
		if finish != "" {
			candidate["finishReason"] = finish
		}
		if opt.logprobs {
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
			candidate["logprobsResult"] = map[string]any{"chosenCandidates": chosen, "topCandidates": top}
		}
		candidates = append(candidates, candidate)
	}
	return map[string]any{"candidates": candidates, "usageMetadata": usage,
		"modelVersion": geminiModel, "responseId": "mockGeminiResponse"}
}

func (m *mockProvider) serveGemini(w http.ResponseWriter, body map[string]any, stream, tools bool) {
	opt := geminiOptionsOf(body)
	full := geminiUsage(12, 4)
	if !stream {
		parts := []any{
			map[string]any{"text": "**Thinking about greetings**", "thought": true},
			map[string]any{"text": mockFullText(), "thoughtSignature": "CiQB0e2Kb6Yk"},
		}
		if tools {
			parts = geminiCalls()
		}
		writeJSON(w, geminiAnswer(parts, "STOP", full, opt))
		return
	}
	s := newSSE(w, "\r\n")
	if tools {
		s.event("", geminiAnswer([]any{map[string]any{"text": "Let me look."}}, "", geminiUsage(3, 0)))
		s.event("", geminiAnswer(geminiCalls(), "STOP", full))
		return
	}
	for i, piece := range mockText {
		finish, usage := "", geminiUsage(int64(i+1), 0)
		if i == len(mockText)-1 {
			finish, usage = "STOP", full
		}
		s.event("", geminiAnswer([]any{map[string]any{"text": piece}}, finish, usage, opt))
	}
}
