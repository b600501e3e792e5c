package provider

import (
	"sync"
	"unicode/utf8"

	"github.com/tiktoken-go/tokenizer"

	"github.com/tollgate/tollgate/config"
)

// Token estimates, for answers whose provider reported no usage (a stream
// cut off before its end). They count with OpenAI's o200k_base encoding,
// whose vocabulary is compiled into the binary; other providers' tokenizers
// differ by some percent, which an estimate accepts.
//
// Exact counting costs about half a second per megabyte, so only the first
// exactTokenBytes of a text (or of a request's texts together) are counted;
// the rest is extrapolated from the tokens per byte seen so far.

// Per-message overheads of OpenAI's chat format.
const (
	tokensPerMessage = 3  // <|start|>{role}\n … <|end|>
	tokensPerName    = 1  // a message's name field
	tokensReplyStart = 3  // every reply is primed with <|start|>assistant<|message|>
	tokensPerImage   = 85 // an image at low detail, when no model says more
	exactTokenBytes  = 256 << 10
	bytesPerToken    = 4 // for extrapolating before anything was counted
)

var o200k = sync.OnceValue(func() tokenizer.Codec {
	c, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil { // cannot happen: the encoding is built in
		return nil
	}
	c.SetErrorMode(tokenizer.ErrorModeReplace)
	return c
})

// EstimateTokens estimates the number of tokens of a text.
func EstimateTokens(text string) int64 {
	var c tokenCounter
	c.add(text)
	return c.tokens
}

// EstimatePromptTokens estimates the prompt tokens of an OpenAI
// chat-completions request body for model m: each message's content (text
// parts; an image or file part at what the hold counted for it, m's
// image_tokens and file_tokens — 85 per image without a model), name, tool
// calls and tool call id, OpenAI's per-message and reply overheads, and the
// tool definitions. A body that is not such a request is counted as plain
// text. It reads the parse the adapter made of the body, if it made one.
func EstimatePromptTokens(req *Request, m *config.Model) int64 {
	image, file := int64(tokensPerImage), int64(0)
	if m != nil {
		image, file = int64(m.ImageTokens), int64(m.FileTokens)
	}
	r, err := req.chat()
	if err != nil {
		return EstimateTokens(string(req.Body))
	}
	var c tokenCounter
	for i := range r.Messages {
		m := &r.Messages[i]
		c.tokens += tokensPerMessage
		c.add(m.Role)
		if m.Name != "" {
			c.tokens += tokensPerName
			c.add(m.Name)
		}
		parts, err := m.parts()
		if err != nil {
			c.add(string(m.Content))
		}
		for _, p := range parts {
			switch p.Type {
			case "text":
				c.add(p.Text)
			case "refusal":
				c.add(p.Refusal)
			case "image_url":
				c.tokens += image
			case "file":
				c.tokens += file
			}
		}
		for _, call := range m.ToolCalls {
			c.add(call.ID)
			c.add(call.Function.Name)
			c.add(call.Function.Arguments)
		}
		c.add(m.ToolCallID)
	}
	for _, t := range r.Tools {
		c.add(t.Function.Name)
		c.add(t.Function.Description)
		c.add(string(t.Function.Parameters))
	}
	c.tokens += tokensReplyStart
	return c.tokens
}

// tokenCounter counts texts exactly up to exactTokenBytes in all, and
// extrapolates beyond.
type tokenCounter struct {
	tokens  int64
	counted int64 // bytes counted exactly
	exact   int64 // tokens of those bytes
}

func (c *tokenCounter) add(text string) {
	if text == "" {
		return
	}
	room := exactTokenBytes - c.counted
	head, tail := text, ""
	if int64(len(text)) > room {
		cut := int(max(room, 0))
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		head, tail = text[:cut], text[cut:]
	}
	if head != "" {
		n := c.count(head)
		c.tokens += n
		c.counted += int64(len(head))
		c.exact += n
	}
	if tail != "" {
		if c.counted > 0 && c.exact > 0 {
			c.tokens += int64(float64(len(tail)) * float64(c.exact) / float64(c.counted))
		} else {
			c.tokens += int64(len(tail)) / bytesPerToken
		}
	}
}

func (c *tokenCounter) count(s string) int64 {
	codec := o200k()
	if codec == nil {
		return int64(len(s)+bytesPerToken-1) / bytesPerToken
	}
	n, err := codec.Count(s)
	if err != nil {
		return int64(len(s)+bytesPerToken-1) / bytesPerToken
	}
	return int64(n)
}
