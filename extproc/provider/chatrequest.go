package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrUnsupportedRequest wraps every error about a client request that an
// adapter cannot express in its provider's API (an image URL Gemini cannot
// fetch, a tool message that answers no earlier tool call…). The message
// after it is safe to show the client: the router answers 400
// invalid_request with it.
var ErrUnsupportedRequest = errors.New("the request cannot be sent to this model's provider")

// openAIChatRequest is the part of an OpenAI chat-completions request that the
// translating adapters (Anthropic, Gemini) read. Fields they do not read are
// listed in each adapter's doc comment as dropped.
type openAIChatRequest struct {
	Messages            []ChatMessage   `json:"messages"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int64          `json:"max_tokens"`
	MaxCompletionTokens *int64          `json:"max_completion_tokens"`
	Stop                json.RawMessage `json:"stop"`
	PresencePenalty     *float64        `json:"presence_penalty"`
	FrequencyPenalty    *float64        `json:"frequency_penalty"`
	Seed                *int64          `json:"seed"`
	User                string          `json:"user"`
	Tools               []chatTool      `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	N                   *int64          `json:"n"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int64          `json:"top_logprobs"`
	ResponseFormat      *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`
}

// ChatMessage is one message of an OpenAI chat-completions request: the
// adapters read it, and the responses package writes it. Content is a
// string, an array of parts, or null (nil writes null).
type ChatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCalls  []ToolCall      `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's reasoning, as DeepSeek
	// writes it and wants it back on a tool-call turn; the translations
	// (Responses, Messages) carry it, and only a profile that takes it
	// gets it (ReasoningBack).
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// ToolCall is a tool call of an assistant message, in a request or in an
// answer.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
	// ExtraContent is where Gemini's OpenAI-compatible endpoint puts a
	// thought signature; read for Gemini only.
	ExtraContent *struct {
		Google *struct {
			ThoughtSignature string `json:"thought_signature"`
		} `json:"google"`
	} `json:"extra_content,omitempty"`
}

// ToolFunction is the function a ToolCall calls, its arguments a JSON text.
type ToolFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatTool is one entry of the request's tools.
type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
	// CacheControl (Anthropic's {"type":"ephemeral"}) marks the end of a
	// prompt prefix to cache; read by Bedrock only.
	CacheControl json.RawMessage `json:"cache_control"`
}

// contentPart is one element of an array content.
type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
	// CacheControl, as chatTool's: the prefix up to this part is cached.
	CacheControl json.RawMessage `json:"cache_control"`
}

// toolChoice is the request's tool_choice, normalized: mode is "", "none",
// "auto" or "required"; name is set when one function is forced (mode
// "required").
type toolChoice struct {
	mode string
	name string
}

// structuredOutput reports that the client asked for JSON output
// (response_format json_object or json_schema).
func (cr *openAIChatRequest) structuredOutput() bool {
	f := cr.ResponseFormat
	return f != nil && (f.Type == "json_object" || f.Type == "json_schema")
}

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrUnsupportedRequest, fmt.Sprintf(format, args...))
}

// parseChatRequest is the request's body as a translating adapter reads
// it (the request's one parse, see Request.chat), or the reason the
// adapter cannot take it. The adapter must not modify it.
func parseChatRequest(req *Request) (*openAIChatRequest, error) {
	r, err := req.chat()
	if err != nil {
		return nil, unsupported("the body is not a valid chat-completions request: %v", err)
	}
	for i, t := range r.Tools {
		if t.Type != "function" {
			return nil, unsupported("tools[%d]: only function tools are supported, got %q", i, t.Type)
		}
	}
	return r, nil
}

// outputLimit is the smaller of the client's max_tokens and
// max_completion_tokens and modelMax (see OutputLimit).
func (r *openAIChatRequest) outputLimit(modelMax int64) int64 {
	limit := modelMax
	for _, v := range [2]*int64{r.MaxTokens, r.MaxCompletionTokens} {
		if v != nil && *v > 0 && (limit <= 0 || *v < limit) {
			limit = *v
		}
	}
	return limit
}

// choices is the client's n, at least 1.
func (r *openAIChatRequest) choices() int64 {
	if r.N == nil || *r.N < 1 {
		return 1
	}
	return *r.N
}

// stopSequences reads stop: a string, an array of strings, or null.
func (r *openAIChatRequest) stopSequences() ([]string, error) {
	raw := bytes.TrimSpace(r.Stop)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, unsupported("stop: %v", err)
		}
		return []string{s}, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, unsupported("stop must be a string or an array of strings")
	}
	return list, nil
}

// toolChoice reads tool_choice: "none", "auto", "required", or
// {"type":"function","function":{"name":…}}.
func (r *openAIChatRequest) toolChoice() (toolChoice, error) {
	raw := bytes.TrimSpace(r.ToolChoice)
	if len(raw) == 0 || string(raw) == "null" {
		return toolChoice{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return toolChoice{}, unsupported("tool_choice: %v", err)
		}
		switch s {
		case "none", "auto", "required":
			return toolChoice{mode: s}, nil
		}
		return toolChoice{}, unsupported("tool_choice %q is not none, auto or required", s)
	}
	var named struct {
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(raw, &named); err != nil || named.Function.Name == "" {
		return toolChoice{}, unsupported(`tool_choice must be a string or {"type":"function","function":{"name":…}}`)
	}
	return toolChoice{mode: "required", name: named.Function.Name}, nil
}

// parts decodes a message content into parts: a string is one text part,
// null or absent is none.
func (m *ChatMessage) parts() ([]contentPart, error) {
	raw := bytes.TrimSpace(m.Content)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, unsupported("content: %v", err)
		}
		return []contentPart{{Type: "text", Text: s}}, nil
	}
	var ps []contentPart
	if err := json.Unmarshal(raw, &ps); err != nil {
		return nil, unsupported("content must be a string or an array of content parts")
	}
	return ps, nil
}

// text joins the text (and refusal) parts of the content; any other part is
// an error, for roles whose provider counterpart holds only text.
func (m *ChatMessage) text() (string, error) {
	ps, err := m.parts()
	if err != nil {
		return "", err
	}
	if len(ps) == 1 && ps[0].Type == "text" {
		return ps[0].Text, nil
	}
	var b strings.Builder
	for _, p := range ps {
		switch p.Type {
		case "text":
			b.WriteString(p.Text)
		case "refusal":
			b.WriteString(p.Refusal)
		default:
			return "", unsupported("a %s message may only hold text, got a %q part", m.Role, p.Type)
		}
	}
	return b.String(), nil
}

// toolArguments checks that a tool call's arguments are a JSON object, as
// Anthropic's input and Gemini's args must be; empty arguments are {}.
func toolArguments(args string) (json.RawMessage, error) {
	trimmed := strings.TrimSpace(args)
	if trimmed == "" {
		return json.RawMessage("{}"), nil
	}
	if !json.Valid([]byte(trimmed)) || trimmed[0] != '{' {
		return nil, unsupported("tool call arguments must be a JSON object")
	}
	return json.RawMessage(trimmed), nil
}

// dataURL splits a data: URL with base64 data into its media type and data.
func dataURL(u string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(u, "data:")
	if !found {
		return "", "", false
	}
	meta, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, found = strings.CutSuffix(meta, ";base64")
	if !found || mediaType == "" {
		return "", "", false
	}
	return mediaType, data, true
}

// marshalJSON encodes v without HTML escaping, so prompts reach providers
// (and goldens read) as written.
func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// turnBlocks make one provider's content blocks, for alternate.
type turnBlocks[B any] struct {
	// user is a user message's blocks.
	user func(m *ChatMessage) ([]B, error)
	// text, toolCall and toolResult are an assistant's text, one of its
	// tool calls (checked: an id, a name, arguments that are an object)
	// and a tool message's result; ids are without Gemini's signature.
	text       func(text string) B
	toolCall   func(id, name string, args json.RawMessage) B
	toolResult func(id, text string) B
	// cachePoint, when set, is the block that follows a part marked
	// cache_control (and a tool message with one), for a provider that
	// caches prompt prefixes by such markers (Bedrock's cachePoint).
	cachePoint func() B
}

// marked reports a cache_control on a content part or a tool.
func marked(cacheControl json.RawMessage) bool {
	c := bytes.TrimSpace(cacheControl)
	return len(c) > 0 && string(c) != "null"
}

// cacheMarked reports a content part of m marked cache_control.
func (m *ChatMessage) cacheMarked() bool {
	ps, err := m.parts()
	if err != nil {
		return false
	}
	for _, p := range ps {
		if marked(p.CacheControl) {
			return true
		}
	}
	return false
}

// turn is one message of a provider whose user and assistant messages
// alternate.
type turn[B any] struct {
	role   string
	blocks []B
}

// alternate splits off the text of the system and developer messages,
// wherever they are, and turns the rest into alternating user and
// assistant turns (Anthropic's and Bedrock's shape): tool messages become
// user turns of tool results, and consecutive messages of one role are
// merged.
func alternate[B any](msgs []ChatMessage, tb turnBlocks[B]) ([]string, []turn[B], error) {
	var system []string
	var out []turn[B]
	for i := range msgs {
		m := &msgs[i]
		var role string
		var blocks []B
		var err error
		switch m.Role {
		case "system", "developer":
			var text string
			if text, err = m.text(); err == nil && text != "" {
				system = append(system, text)
			}
		case "user":
			role = "user"
			blocks, err = tb.user(m)
		case "assistant":
			role = "assistant"
			blocks, err = assistantBlocks(m, tb)
		case "tool":
			role = "user"
			var text string
			if text, err = m.text(); err == nil {
				if m.ToolCallID == "" {
					err = unsupported("a tool message needs a tool_call_id")
				}
				blocks = []B{tb.toolResult(unsignedToolCallID(m.ToolCallID), text)}
				if tb.cachePoint != nil && m.cacheMarked() {
					blocks = append(blocks, tb.cachePoint())
				}
			}
		default:
			err = unsupported("role %q is not supported", m.Role)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].role == role {
			out[n-1].blocks = append(out[n-1].blocks, blocks...)
		} else {
			out = append(out, turn[B]{role: role, blocks: blocks})
		}
	}
	return system, out, nil
}

// assistantBlocks are an assistant message's text and tool calls.
func assistantBlocks[B any](m *ChatMessage, tb turnBlocks[B]) ([]B, error) {
	text, err := m.text()
	if err != nil {
		return nil, err
	}
	var blocks []B
	if text != "" {
		blocks = append(blocks, tb.text(text))
	}
	for j, call := range m.ToolCalls {
		args, err := toolArguments(call.Function.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tool_calls[%d]: %w", j, err)
		}
		if call.ID == "" || call.Function.Name == "" {
			return nil, unsupported("tool_calls[%d] needs an id and a function name", j)
		}
		blocks = append(blocks, tb.toolCall(unsignedToolCallID(call.ID), call.Function.Name, args))
	}
	return blocks, nil
}
