package extproc

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/oaierror"
)

// This file bounds the prompt tokens a request can cost, from what
// validation counted in one pass over the body and without tokenizing
// anything (exact counting costs about half a second per megabyte). The
// bound is what the balance, every spend budget and the token limits hold
// (promptTokensHeld); why it is an upper bound at every provider type is in
// docs/decisions.md (The prompt hold is a proven upper bound). In short:
// byte-level BPE (OpenAI, Anthropic) and SentencePiece with byte fallback
// (Gemini) never make more tokens of a text than it has bytes, and a JSON
// string is never shorter than the text it decodes to; what a provider
// adds is bounded per item, or per byte of what it renders itself.

const (
	// tokensPerItem is what each message, content part, tool call and
	// tool definition may cost beyond the bytes of its text: its
	// provider's framing (OpenAI: 3 per message and 1 per name; Gemini's
	// turn markers and the dummy prefix of each text piece; a tool's
	// TypeScript frame), with room to spare.
	tokensPerItem = 16
	// structuredFactor is what each byte of a JSON value that a provider
	// renders in its own form may cost: tool definitions and response
	// schemas (OpenAI's TypeScript-like namespace, Anthropic's and
	// Gemini's tool prompts), tool calls, and tool results that are JSON
	// (Gemini takes them as objects). Every value of such JSON takes at
	// least two bytes with its separator, and a rendering adds at most a
	// separator and a decoration to its text (" | ", ",\n", "?: ",
	// "// "): at most three tokens for those two bytes.
	structuredFactor = 3
	// promptFixedTokens is what every prompt may cost beyond its items:
	// OpenAI primes each reply with 3 tokens, others frame the whole
	// conversation.
	promptFixedTokens = 16
	// toolTokens is what a request that defines tools or a response format
	// may cost beyond them: the providers' own tool-use instructions
	// (Anthropic documents up to 346 tokens; a response format reaches it
	// as a tool), OpenAI's "# Tools" namespace frame.
	toolTokens = 500
	// replacementTokens is what each byte that is not UTF-8 may cost
	// beyond its own: a JSON decoder makes it U+FFFD, three bytes.
	replacementTokens = 2
)

// promptTally is what validation counts of a body for its prompt bound.
type promptTally struct {
	items int64 // messages, content parts, tool calls, tool definitions
	// media are the bytes of image and file parts, which are counted at
	// the model's image_tokens and file_tokens instead.
	media int64
	// structured are the bytes of JSON that providers render in their own
	// form (see structuredFactor).
	structured int64
	// toolResults and longestCall: Gemini names the function a tool
	// result answers, which the tool message itself does not carry.
	toolResults, longestCall int64
	// tools is true when the request defines tools or a response format.
	tools bool
}

// promptBound is the most prompt tokens the body can cost at any provider
// type (docs/decisions.md): every byte of the body one token, bytes that
// are not UTF-8 three, bytes of structured JSON structuredFactor, image and
// file parts the model's image_tokens and file_tokens instead of their
// bytes, and the overheads per item and per request.
func promptBound(body []byte, cr *validChat) int64 {
	t := &cr.tally
	n := int64(len(body)) - t.media + (structuredFactor-1)*t.structured
	n += replacementTokens * notUTF8(body)
	n += tokensPerItem*t.items + t.toolResults*t.longestCall + promptFixedTokens
	n += cr.Images*int64(cr.Model.ImageTokens) + cr.Files*int64(cr.Model.FileTokens)
	if t.tools {
		n += toolTokens
	}
	return n
}

// notUTF8 counts the bytes of body that are not part of a UTF-8 character;
// valid bodies (every SDK's) cost one fast check.
func notUTF8(body []byte) int64 {
	if utf8.Valid(body) {
		return 0
	}
	var n int64
	for len(body) > 0 {
		r, size := utf8.DecodeRune(body)
		if r == utf8.RuneError && size == 1 {
			n++
		}
		body = body[size:]
	}
	return n
}

// tallyTopLevel counts the request's tool definitions and response
// format, which providers render in their own form.
func tallyTopLevel(top *fields, t *promptTally) {
	for _, v := range [...]gjson.Result{top.tools, top.functions, top.responseFormat} {
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		t.structured += int64(len(v.Raw))
		t.tools = true
		if v.IsArray() {
			t.items += v.Get("#").Int()
		}
	}
}

// tallyMessage counts a validated message for the bound: the message,
// its tool calls and the longest name they call, and its content when the
// message is a tool's result given as JSON.
func tallyMessage(t *promptTally, role, toolCalls, content gjson.Result) {
	t.items++
	if toolCalls.IsArray() {
		t.structured += int64(len(toolCalls.Raw))
		toolCalls.ForEach(func(_, c gjson.Result) bool {
			t.items++
			t.longestCall = max(t.longestCall, int64(len(c.Get("function.name").Raw)))
			return true
		})
	}
	if role.Str != "tool" {
		return
	}
	t.toolResults++
	switch {
	case content.Type == gjson.String:
		if s := strings.TrimSpace(content.Str); s != "" && (s[0] == '{' || s[0] == '[') {
			t.structured += int64(len(content.Raw))
		}
	case content.IsArray():
		t.structured += int64(len(content.Raw))
	}
}

// promptTokensHeld is the prompt tokens a request is held for, by the
// balance, every spend budget and the token limits: its bound, but never
// more than the model's context window leaves beside the held output
// limit, since a provider refuses a prompt that does not fit there rather
// than bill it.
func promptTokensHeld(cr validChat) int64 {
	if cr.Model.Kind != config.KindChat {
		// Each input of an embedding, completion or rerank request has a
		// window of its own: the bound is not capped.
		return cr.PromptBound
	}
	return max(min(cr.PromptBound, int64(cr.Model.ContextWindow)-cr.MaxTokens), 0)
}

// validateWindow refuses a request that certainly exceeds the model's
// context window: one whose output limit leaves no room for even one
// prompt token. A prompt's bound over the window is not certain (real
// text has about four bytes per token) and is only capped (promptTokensHeld).
func validateWindow(_ *fields, r *validChat) *oaierror.Error {
	window := int64(r.Model.ContextWindow)
	if r.MaxTokens < window {
		return nil
	}
	e := oaierror.ContextLengthExceeded.With("This model's maximum context length is "+strconv.FormatInt(window, 10)+
		" tokens. However, you requested at least "+strconv.FormatInt(r.MaxTokens+1, 10)+" tokens (at least 1 in the messages, "+
		strconv.FormatInt(r.MaxTokens, 10)+" in the completion). Please reduce the length of the messages or completion.", "messages")
	return &e
}
