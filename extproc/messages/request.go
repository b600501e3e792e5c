// Package messages serves Anthropic's Messages API (POST /v1/messages) on
// every provider through the one intermediate form Tollgate meters: the
// chat-completion request every adapter translates. A Messages request
// becomes a chat request (ToChat), which validation, admission and the
// holds read; for a deployment of another provider type, the adapter's
// chat answer becomes a Messages answer (Wrap); for an Anthropic
// deployment the client's own request is passed through and the answer
// relayed as Anthropic wrote it (NewRelay), metered by the Anthropic
// adapter's parsing.
package messages

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/tollgate/tollgate/oaierror"
)

// Request is what the router learns of a Messages request besides the
// chat body it becomes.
type Request struct {
	// Model is the model the client asked for.
	Model string
	// Stream is the client's stream flag.
	Stream bool
	// PassOnly names the request's features that chat cannot express and
	// only an Anthropic deployment, which gets the request as it is, can
	// serve (a server tool, a document by URL…); empty when every
	// deployment can. The chat body leaves them out.
	PassOnly []string
}

// Header names a Messages client sends and an Anthropic deployment gets.
const (
	HeaderVersion = "anthropic-version"
	HeaderBeta    = "anthropic-beta"
)

// request is a Messages request as ToChat reads it.
type request struct {
	Model         *string         `json:"model"`
	MaxTokens     *int64          `json:"max_tokens"`
	System        json.RawMessage `json:"system"`
	Messages      []message       `json:"messages"`
	Stream        bool            `json:"stream"`
	StopSequences []string        `json:"stop_sequences"`
	Temperature   *float64        `json:"temperature"`
	TopP          *float64        `json:"top_p"`
	Tools         []tool          `json:"tools"`
	ToolChoice    *toolChoice     `json:"tool_choice"`
	Metadata      *struct {
		UserID string `json:"user_id"`
	} `json:"metadata"`
	MCPServers json.RawMessage `json:"mcp_servers"`
	Container  json.RawMessage `json:"container"`
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// block is a content block of a request.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Source    *source         `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Title     string          `json:"title"`
	Thinking  string          `json:"thinking"`
	// CacheControl ends a prompt prefix to cache; see ToChatCaching.
	CacheControl json.RawMessage `json:"cache_control"`
}

type source struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
	URL       string `json:"url"`
	FileID    string `json:"file_id"`
}

type tool struct {
	Type         string          `json:"type"`
	Name         string          `json:"name"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"input_schema"`
	CacheControl json.RawMessage `json:"cache_control"`
}

type toolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use"`
}

// chatMessage is one message of the chat body.
type chatMessage struct {
	Role       string         `json:"role"`
	Content    any            `json:"content"`
	ToolCalls  []chatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's thinking, for the servers
	// that take it back (provider.ReasoningBack).
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatPart struct {
	Type         string          `json:"type"`
	Text         string          `json:"text,omitempty"`
	ImageURL     *imageURL       `json:"image_url,omitempty"`
	File         *file           `json:"file,omitempty"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type imageURL struct {
	URL string `json:"url"`
}

type file struct {
	FileData string `json:"file_data"`
	Filename string `json:"filename,omitempty"`
}

type chatTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
	CacheControl json.RawMessage `json:"cache_control,omitempty"`
}

type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxCompletionTokens int64          `json:"max_completion_tokens"`
	Stream              bool           `json:"stream,omitempty"`
	StreamOptions       *streamOptions `json:"stream_options,omitempty"`
	Stop                []string       `json:"stop,omitempty"`
	Temperature         *float64       `json:"temperature,omitempty"`
	TopP                *float64       `json:"top_p,omitempty"`
	Tools               []chatTool     `json:"tools,omitempty"`
	ToolChoice          any            `json:"tool_choice,omitempty"`
	ParallelToolCalls   *bool          `json:"parallel_tool_calls,omitempty"`
	User                string         `json:"user,omitempty"`
}

type namedChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

func invalid(param, format string, args ...any) *oaierror.Error {
	e := oaierror.Invalid("invalid_request", param, fmt.Sprintf(format, args...))
	return &e
}

// ToChat reads a Messages request and writes the chat-completion request it
// stands for. A stream's chat request asks for its usage, so that the
// answer can report it. Parameters chat has no place for are dropped:
// top_k, thinking (its budget is within max_tokens, which the hold
// bounds), cache_control, service_tier, redacted thinking. An assistant
// turn's thinking blocks become its reasoning_content, which only a
// server that takes it gets (provider.ReasoningBack). What chat cannot
// express at all is named in Request.PassOnly.
func ToChat(body []byte) ([]byte, Request, *oaierror.Error) {
	return toChat(body, false)
}

// ToChatCaching is ToChat keeping the request's cache_control marks in the
// chat request: on the content parts of the blocks they mark (a marked
// tool_result's text becomes a part to carry it, a marked system block's
// text a system message's part) and on the tools, where a provider that
// caches by such marks (Bedrock's cachePoint) reads them. Chat has no such
// field, so only a request for such a provider is made this way.
func ToChatCaching(body []byte) ([]byte, Request, *oaierror.Error) {
	return toChat(body, true)
}

func toChat(body []byte, caching bool) ([]byte, Request, *oaierror.Error) {
	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, Request{}, invalid("", "The request body is not a valid Messages request: %s", clip(err.Error()))
	}
	out := Request{Stream: req.Stream}
	if req.Model == nil || *req.Model == "" {
		return nil, out, invalid("model", "model: Field required")
	}
	out.Model = *req.Model
	if req.MaxTokens == nil {
		return nil, out, invalid("max_tokens", "max_tokens: Field required")
	}
	if *req.MaxTokens < 1 {
		return nil, out, invalid("max_tokens", "max_tokens: Input should be greater than or equal to 1")
	}
	if len(req.Messages) == 0 {
		return nil, out, invalid("messages", "messages: at least one message is required")
	}
	chat := chatRequest{
		Model: out.Model, MaxCompletionTokens: *req.MaxTokens, Stream: req.Stream,
		Stop: req.StopSequences, Temperature: req.Temperature, TopP: req.TopP,
	}
	if req.Stream {
		chat.StreamOptions = &streamOptions{IncludeUsage: true}
	}
	if req.Metadata != nil {
		chat.User = req.Metadata.UserID
	}
	if len(bytes.TrimSpace(req.MCPServers)) > 0 && string(req.MCPServers) != "null" {
		out.PassOnly = append(out.PassOnly, "mcp_servers")
	}
	if len(bytes.TrimSpace(req.Container)) > 0 && string(req.Container) != "null" {
		out.PassOnly = append(out.PassOnly, "container")
	}
	system, e := systemContent(req.System, caching)
	if e != nil {
		return nil, out, e
	}
	if system != nil {
		chat.Messages = append(chat.Messages, chatMessage{Role: "system", Content: system})
	}
	for i, m := range req.Messages {
		msgs, passOnly, e := chatMessages(i, m, caching)
		if e != nil {
			return nil, out, e
		}
		chat.Messages = append(chat.Messages, msgs...)
		out.PassOnly = append(out.PassOnly, passOnly...)
	}
	for i, t := range req.Tools {
		if t.Type != "" && t.Type != "custom" {
			// A server tool (web_search_20250305, bash_20250124,
			// text_editor_…, computer_…): Anthropic runs it.
			out.PassOnly = append(out.PassOnly, "tools["+fmt.Sprint(i)+"] ("+t.Type+")")
			continue
		}
		if t.Name == "" {
			return nil, out, invalid(fmt.Sprintf("tools.%d.name", i), "tools.%d.name: Field required", i)
		}
		var ct chatTool
		ct.Type = "function"
		ct.Function.Name, ct.Function.Description, ct.Function.Parameters = t.Name, t.Description, t.InputSchema
		if caching && marked(t.CacheControl) {
			ct.CacheControl = t.CacheControl
		}
		if len(bytes.TrimSpace(ct.Function.Parameters)) == 0 || string(ct.Function.Parameters) == "null" {
			ct.Function.Parameters = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		chat.Tools = append(chat.Tools, ct)
	}
	if tc := req.ToolChoice; tc != nil && len(chat.Tools) > 0 {
		switch tc.Type {
		case "auto", "":
			chat.ToolChoice = "auto"
		case "any":
			chat.ToolChoice = "required"
		case "none":
			chat.ToolChoice = "none"
		case "tool":
			if tc.Name == "" {
				return nil, out, invalid("tool_choice.name", "tool_choice.name: Field required")
			}
			chat.ToolChoice = namedChoice{Type: "function", Function: struct {
				Name string `json:"name"`
			}{tc.Name}}
		default:
			return nil, out, invalid("tool_choice.type", "tool_choice.type: %q is not one of auto, any, tool, none", clip(tc.Type))
		}
		if tc.DisableParallelToolUse && tc.Type != "none" {
			f := false
			chat.ParallelToolCalls = &f
		}
	}
	b, err := json.Marshal(chat)
	if err != nil {
		return nil, out, invalid("", "The request cannot be translated: %s", clip(err.Error()))
	}
	return b, out, nil
}

// marked reports a cache_control mark.
func marked(cacheControl json.RawMessage) bool {
	c := bytes.TrimSpace(cacheControl)
	return len(c) > 0 && string(c) != "null"
}

// systemContent is the system message's content (nil for none): the
// prompt's text (systemText) or, caching with a block marked, text parts
// carrying the marks, one per run of blocks up to a mark.
func systemContent(raw json.RawMessage, caching bool) (any, *oaierror.Error) {
	text, e := systemText(raw)
	if e != nil || text == "" {
		return nil, e
	}
	raw = bytes.TrimSpace(raw)
	var blocks []block
	if !caching || raw[0] != '[' || json.Unmarshal(raw, &blocks) != nil || !slices.ContainsFunc(blocks, func(b block) bool { return marked(b.CacheControl) }) {
		return text, nil
	}
	var parts []chatPart
	var run []string
	for _, b := range blocks {
		run = append(run, b.Text)
		if marked(b.CacheControl) {
			parts = append(parts, chatPart{Type: "text", Text: strings.Join(run, "\n\n"), CacheControl: b.CacheControl})
			run = nil
		}
	}
	if len(run) > 0 {
		parts = append(parts, chatPart{Type: "text", Text: strings.Join(run, "\n\n")})
	}
	return parts, nil
}

// systemText is the system prompt: a string, or text blocks joined by a
// blank line.
func systemText(raw json.RawMessage) (string, *oaierror.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", invalid("system", "system: Input should be a valid string or a list of text blocks")
		}
		return s, nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", invalid("system", "system: Input should be a valid string or a list of text blocks")
	}
	var parts []string
	for i, b := range blocks {
		if b.Type != "text" {
			return "", invalid("system", "system.%d.type: only text blocks may be a system prompt", i)
		}
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n\n"), nil
}

// contentBlocks reads a message's content: a string is one text block.
func contentBlocks(raw json.RawMessage, param string) ([]block, *oaierror.Error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, invalid(param, "%s: Input should be a valid string", param)
		}
		return []block{{Type: "text", Text: s}}, nil
	}
	var blocks []block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, invalid(param, "%s: Input should be a valid string or a list of content blocks", param)
	}
	return blocks, nil
}

// chatMessages turns message i into chat messages: a user message's
// tool_result blocks become tool messages (before the rest of its
// content), an assistant message's tool_use blocks tool calls.
func chatMessages(i int, m message, caching bool) ([]chatMessage, []string, *oaierror.Error) {
	param := fmt.Sprintf("messages.%d.content", i)
	blocks, e := contentBlocks(m.Content, param)
	if e != nil {
		return nil, nil, e
	}
	var passOnly []string
	switch m.Role {
	case "user":
		var out []chatMessage
		var parts []chatPart
		for j, b := range blocks {
			where := fmt.Sprintf("%s.%d", param, j)
			n := len(parts)
			switch b.Type {
			case "text":
				parts = append(parts, chatPart{Type: "text", Text: b.Text})
			case "image":
				p, ok := imagePart(b.Source)
				if !ok {
					passOnly = append(passOnly, where+" (image source)")
					continue
				}
				parts = append(parts, p)
			case "document":
				p, ok := documentPart(b)
				if !ok {
					passOnly = append(passOnly, where+" (document source)")
					continue
				}
				parts = append(parts, p)
			case "tool_result":
				text, ok, e := toolResultText(b, where)
				if e != nil {
					return nil, nil, e
				}
				if !ok {
					passOnly = append(passOnly, where+" (tool_result with images)")
				}
				var content any = text
				if caching && marked(b.CacheControl) {
					content = []chatPart{{Type: "text", Text: text, CacheControl: b.CacheControl}}
				}
				out = append(out, chatMessage{Role: "tool", ToolCallID: b.ToolUseID, Content: content})
			case "thinking", "redacted_thinking":
			case "search_result", "server_tool_use", "web_search_tool_result", "container_upload":
				passOnly = append(passOnly, where+" ("+b.Type+")")
			default:
				return nil, nil, invalid(where+".type", "%s.type: unknown content block type %q", where, clip(b.Type))
			}
			if caching && marked(b.CacheControl) && len(parts) > n {
				parts[len(parts)-1].CacheControl = b.CacheControl
			}
		}
		if len(parts) > 0 {
			out = append(out, chatMessage{Role: "user", Content: userContent(parts)})
		}
		return out, passOnly, nil
	case "assistant":
		msg := chatMessage{Role: "assistant"}
		var text strings.Builder
		for j, b := range blocks {
			where := fmt.Sprintf("%s.%d", param, j)
			switch b.Type {
			case "text":
				text.WriteString(b.Text)
			case "tool_use":
				var call chatToolCall
				call.ID, call.Type, call.Function.Name = b.ID, "function", b.Name
				call.Function.Arguments = compact(b.Input)
				msg.ToolCalls = append(msg.ToolCalls, call)
			case "thinking":
				// The turn's reasoning (a thinking block, as Tollgate
				// gives DeepSeek's reasoning_content), for the servers
				// that want it back.
				msg.ReasoningContent += b.Thinking
			case "redacted_thinking":
			case "server_tool_use", "web_search_tool_result", "web_fetch_tool_result", "code_execution_tool_result", "mcp_tool_use", "mcp_tool_result", "container_upload":
				passOnly = append(passOnly, where+" ("+b.Type+")")
			default:
				return nil, nil, invalid(where+".type", "%s.type: unknown content block type %q", where, clip(b.Type))
			}
		}
		if text.Len() > 0 {
			msg.Content = text.String()
		}
		if msg.Content == nil && len(msg.ToolCalls) == 0 {
			return nil, passOnly, nil
		}
		return []chatMessage{msg}, passOnly, nil
	}
	return nil, nil, invalid(fmt.Sprintf("messages.%d.role", i), "messages.%d.role: Input should be 'user' or 'assistant'", i)
}

// userContent is a user message's chat content: a string for text alone.
func userContent(parts []chatPart) any {
	if len(parts) == 1 && parts[0].Type == "text" && parts[0].CacheControl == nil {
		return parts[0].Text
	}
	return parts
}

// imagePart is an image block as an image_url part: base64 data as a data
// URL, a URL as it is; a file id has no chat counterpart.
func imagePart(s *source) (chatPart, bool) {
	if s == nil {
		return chatPart{}, false
	}
	switch s.Type {
	case "base64":
		return chatPart{Type: "image_url", ImageURL: &imageURL{URL: "data:" + s.MediaType + ";base64," + s.Data}}, true
	case "url":
		return chatPart{Type: "image_url", ImageURL: &imageURL{URL: s.URL}}, true
	}
	return chatPart{}, false
}

// documentPart is a document block as a chat part: a base64 PDF as a file
// part, plain text as text; a URL or file id has no chat counterpart.
func documentPart(b block) (chatPart, bool) {
	s := b.Source
	if s == nil {
		return chatPart{}, false
	}
	switch s.Type {
	case "base64":
		if s.MediaType != "application/pdf" {
			return chatPart{}, false
		}
		name := b.Title
		if name == "" {
			name = "document.pdf"
		}
		return chatPart{Type: "file", File: &file{FileData: "data:application/pdf;base64," + s.Data, Filename: name}}, true
	case "text":
		return chatPart{Type: "text", Text: s.Data}, true
	}
	return chatPart{}, false
}

// toolResultText is a tool_result's content as a tool message's text
// (text blocks joined; an error result says so first); ok is false when
// it holds images, which a tool message cannot.
func toolResultText(b block, where string) (string, bool, *oaierror.Error) {
	var text string
	ok := true
	raw := bytes.TrimSpace(b.Content)
	if len(raw) > 0 && string(raw) != "null" {
		blocks, e := contentBlocks(raw, where+".content")
		if e != nil {
			return "", false, e
		}
		var parts []string
		for _, c := range blocks {
			switch c.Type {
			case "text":
				parts = append(parts, c.Text)
			default:
				ok = false
			}
		}
		text = strings.Join(parts, "\n")
	}
	if b.IsError {
		text = "Error: " + text
	}
	return text, ok, nil
}

// compact renders a tool input object as chat's arguments string.
func compact(input json.RawMessage) string {
	var b bytes.Buffer
	if len(input) == 0 || json.Compact(&b, input) != nil {
		return "{}"
	}
	return b.String()
}

func clip(s string) string { return oaierror.Clip(s, 200) }

// PassThrough is the Messages body an Anthropic deployment gets: the
// client's, with the deployment's model and the held output limit.
func PassThrough(body []byte, model string, maxTokens int64) ([]byte, error) {
	out, err := sjson.SetBytes(body, "model", model)
	if err != nil {
		return nil, fmt.Errorf("messages: setting the model: %w", err)
	}
	if out, err = sjson.SetBytes(out, "max_tokens", maxTokens); err != nil {
		return nil, fmt.Errorf("messages: setting max_tokens: %w", err)
	}
	return out, nil
}

// MaxTokens is the body's max_tokens (0 when absent).
func MaxTokens(body []byte) int64 { return gjson.GetBytes(body, "max_tokens").Int() }

// ChatParam names a chat parameter as a Messages client knows it.
func ChatParam(p string) string {
	switch {
	case p == "max_completion_tokens" || p == "max_tokens":
		return "max_tokens"
	case p == "stop":
		return "stop_sequences"
	case p == "user":
		return "metadata.user_id"
	case strings.HasPrefix(p, "tools"):
		return p
	case p == "parallel_tool_calls":
		return "tool_choice.disable_parallel_tool_use"
	}
	return p
}
