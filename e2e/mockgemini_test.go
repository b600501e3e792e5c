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

func geminiAnswer(parts []any, finish string, usage map[string]any) map[string]any {
	candidate := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
	if finish != "" {
		candidate["finishReason"] = finish
	}
	return map[string]any{"candidates": []any{candidate}, "usageMetadata": usage,
		"modelVersion": geminiModel, "responseId": "mockGeminiResponse"}
}

func (m *mockProvider) serveGemini(w http.ResponseWriter, stream, tools bool) {
	full := geminiUsage(12, 4)
	if !stream {
		parts := []any{
			map[string]any{"text": "**Thinking about greetings**", "thought": true},
			map[string]any{"text": mockFullText(), "thoughtSignature": "CiQB0e2Kb6Yk"},
		}
		if tools {
			parts = geminiCalls()
		}
		writeJSON(w, geminiAnswer(parts, "STOP", full))
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
		s.event("", geminiAnswer([]any{map[string]any{"text": piece}}, finish, usage))
	}
}
