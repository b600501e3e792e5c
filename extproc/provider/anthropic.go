package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/sse"
)

func init() { adapters[config.TypeAnthropic] = anthropic{defaultEnv} }

// Defaults for Anthropic requests.
const (
	// defaultAnthropicVersion is the anthropic-version header when the
	// provider's api_version is empty (config sets the same default).
	defaultAnthropicVersion = "2023-06-01"
	// fallbackMaxTokens is max_tokens when neither the client nor the
	// model's configuration gives one (config requires the latter).
	fallbackMaxTokens = 4096
)

// anthropic translates to Anthropic's Messages API (POST /v1/messages).
//
// Request:
//   - system and developer messages, wherever they are, become the
//     top-level system prompt, joined by a blank line;
//   - tool messages become user messages of tool_result blocks, and
//     consecutive messages of one role are merged into one, since Anthropic
//     wants user and assistant to alternate;
//   - max_tokens, which Anthropic requires, is the output limit held for
//     the request: the smaller of the client's max_tokens and
//     max_completion_tokens, else the model's configured max_tokens;
//   - temperature is clamped to Anthropic's range 0–1: OpenAI's 0–2 values
//     above 1 become 1, values up to 1 keep their meaning (scaling would
//     turn OpenAI's default 1 into 0.5);
//   - top_p passes, except alongside temperature: recent models (Claude
//     4.1, 4.5…) reject the two together, so temperature wins;
//   - stop (as stop_sequences), tools, tool_choice (none, auto,
//     required as any, a named function as tool), parallel_tool_calls=false
//     (as disable_parallel_tool_use) and user (as metadata.user_id) pass;
//   - response_format json_object and json_schema become a tool whose input
//     schema is the requested one (an object, for json_object), forced when
//     the client has no tools of its own; the tool's input comes back as
//     the message's content, streamed as content deltas, with finish_reason
//     stop;
//   - frequency_penalty, presence_penalty, seed, n above 1, logprobs,
//     top_logprobs, logit_bias and any parameter params.go does not know
//     have no Anthropic counterpart and are refused (400
//     unsupported_parameter); the message name field is dropped.
//
// Response: the id is Anthropic's (msg_…) and the model the one the client
// asked for; created is the time
// Tollgate sent the request (Anthropic gives none). stop_reason end_turn,
// stop_sequence and pause_turn become stop, max_tokens length, tool_use
// tool_calls, refusal content_filter. prompt_tokens counts cached input too (input_tokens +
// cache_creation_input_tokens + cache_read_input_tokens), as OpenAI's does.
type anthropic struct{ env env }

type anthropicRequest struct {
	Model         string               `json:"model"`
	System        string               `json:"system,omitempty"`
	Messages      []anthropicMessage   `json:"messages"`
	MaxTokens     int64                `json:"max_tokens"`
	StopSequences []string             `json:"stop_sequences,omitempty"`
	Temperature   *float64             `json:"temperature,omitempty"`
	TopP          *float64             `json:"top_p,omitempty"`
	Stream        bool                 `json:"stream,omitempty"`
	Tools         []anthropicTool      `json:"tools,omitempty"`
	ToolChoice    *anthropicToolChoice `json:"tool_choice,omitempty"`
	Metadata      *anthropicMetadata   `json:"metadata,omitempty"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

// anthropicBlock is a content block of a request: text, image, tool_use or
// tool_result.
type anthropicBlock struct {
	Type      string           `json:"type"`
	Text      string           `json:"text,omitempty"`
	Source    *anthropicSource `json:"source,omitempty"`
	ID        string           `json:"id,omitempty"`
	Name      string           `json:"name,omitempty"`
	Input     json.RawMessage  `json:"input,omitempty"`
	ToolUseID string           `json:"tool_use_id,omitempty"`
	Content   string           `json:"content,omitempty"`
}

type anthropicSource struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicToolChoice struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type anthropicMetadata struct {
	UserID string `json:"user_id"`
}

// Translate builds the upstream request and the answer's translator.
func (a anthropic) Translate(req *Request, t Target) (Upstream, Response, error) {
	if err := checkParameters(config.TypeAnthropic, req.Body); err != nil {
		return Upstream{}, nil, err
	}
	cr, err := parseChatRequest(req)
	if err != nil {
		return Upstream{}, nil, err
	}
	body, err := anthropicBody(cr, req.Stream, t)
	if err != nil {
		return Upstream{}, nil, err
	}
	structured := ""
	if cr.structuredOutput() {
		structured = anthropicJSONTool
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	version := t.Provider.APIVersion
	if version == "" {
		version = defaultAnthropicVersion
	}
	up := Upstream{
		Path:      path + "/v1/messages",
		Authority: authority,
		Body:      body,
		Headers: []Header{
			{"content-type", "application/json"},
			{"anthropic-version", version},
		},
	}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"x-api-key", k})
	}
	c := &anthropicCodec{tools: map[int]int{}, jsonTool: structured, jsonBlock: -1}
	return up, newTranslated(req, c, a.env.newID(), t.Model.ID, a.env), nil
}

func anthropicBody(cr *openAIChatRequest, stream bool, t Target) ([]byte, error) {
	system, msgs, err := anthropicMessages(cr.Messages)
	if err != nil {
		return nil, err
	}
	out := anthropicRequest{
		Model: t.Deployment.Model, System: system, Messages: msgs,
		TopP: cr.TopP, Stream: stream,
	}
	if t.Model != nil {
		out.MaxTokens = cr.outputLimit(int64(t.Model.MaxTokens))
	} else {
		out.MaxTokens = cr.outputLimit(0)
	}
	if out.MaxTokens <= 0 {
		out.MaxTokens = fallbackMaxTokens
	}
	if cr.Temperature != nil {
		temp := min(*cr.Temperature, 1)
		out.Temperature, out.TopP = &temp, nil
	}
	if out.StopSequences, err = cr.stopSequences(); err != nil {
		return nil, err
	}
	if cr.User != "" {
		out.Metadata = &anthropicMetadata{UserID: cr.User}
	}
	for _, tool := range cr.Tools {
		schema := tool.Function.Parameters
		if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out.Tools = append(out.Tools, anthropicTool{
			Name: tool.Function.Name, Description: tool.Function.Description, InputSchema: schema,
		})
	}
	choice, err := cr.toolChoice()
	if err != nil {
		return nil, err
	}
	clientTools := len(out.Tools) > 0
	if clientTools {
		out.ToolChoice = anthropicChoice(choice, cr.ParallelToolCalls)
	}
	if cr.structuredOutput() {
		// Structured output as a tool whose input is the schema: the
		// answer is that tool's input, handed back as the message's
		// content. Without tools of the client's (or with tool_choice
		// none) the tool is forced; with them, some tool must be used —
		// the client's, or this one for the final answer.
		for _, tool := range out.Tools {
			if tool.Name == anthropicJSONTool {
				return nil, unsupported("response_format cannot be used with a tool named %q", anthropicJSONTool)
			}
		}
		schema := json.RawMessage(`{"type":"object"}`)
		if f := cr.ResponseFormat; f.JSONSchema != nil && len(bytes.TrimSpace(f.JSONSchema.Schema)) > 0 && string(f.JSONSchema.Schema) != "null" {
			schema = f.JSONSchema.Schema
		}
		out.Tools = append(out.Tools, anthropicTool{
			Name:        anthropicJSONTool,
			Description: "Give the final answer as this tool's input: a JSON object that matches its schema.",
			InputSchema: schema,
		})
		switch {
		case !clientTools || choice.mode == "none":
			out.ToolChoice = &anthropicToolChoice{Type: "tool", Name: anthropicJSONTool}
		case choice.name != "":
		default:
			out.ToolChoice = &anthropicToolChoice{Type: "any", DisableParallelToolUse: out.ToolChoice != nil && out.ToolChoice.DisableParallelToolUse}
		}
	}
	return marshalJSON(out)
}

// anthropicJSONTool is the tool that carries structured output
// (response_format json_object or json_schema) on Anthropic.
const anthropicJSONTool = "json_answer"

func anthropicChoice(c toolChoice, parallel *bool) *anthropicToolChoice {
	var tc anthropicToolChoice
	switch {
	case c.mode == "none":
		return &anthropicToolChoice{Type: "none"}
	case c.name != "":
		tc = anthropicToolChoice{Type: "tool", Name: c.name}
	case c.mode == "required":
		tc = anthropicToolChoice{Type: "any"}
	default:
		tc = anthropicToolChoice{Type: "auto"}
	}
	if parallel != nil && !*parallel {
		tc.DisableParallelToolUse = true
	} else if c.mode == "" {
		return nil // Anthropic's default is auto
	}
	return &tc
}

// anthropicMessages splits off the system prompt and turns the rest into
// alternating user and assistant messages.
func anthropicMessages(msgs []ChatMessage) (string, []anthropicMessage, error) {
	system, turns, err := alternate(msgs, turnBlocks[anthropicBlock]{
		user: anthropicUserBlocks,
		text: func(text string) anthropicBlock { return anthropicBlock{Type: "text", Text: text} },
		toolCall: func(id, name string, args json.RawMessage) anthropicBlock {
			return anthropicBlock{Type: "tool_use", ID: id, Name: name, Input: args}
		},
		toolResult: func(id, text string) anthropicBlock {
			return anthropicBlock{Type: "tool_result", ToolUseID: id, Content: text}
		},
	})
	if err != nil {
		return "", nil, err
	}
	out := make([]anthropicMessage, len(turns))
	for i, t := range turns {
		out[i] = anthropicMessage{Role: t.role, Content: t.blocks}
	}
	return strings.Join(system, "\n\n"), out, nil
}

func anthropicUserBlocks(m *ChatMessage) ([]anthropicBlock, error) {
	parts, err := m.parts()
	if err != nil {
		return nil, err
	}
	var blocks []anthropicBlock
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, anthropicBlock{Type: "text", Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, unsupported("an image_url part needs an image_url")
			}
			src := &anthropicSource{Type: "url", URL: p.ImageURL.URL}
			if mt, data, ok := dataURL(p.ImageURL.URL); ok {
				src = &anthropicSource{Type: "base64", MediaType: mt, Data: data}
			} else if !strings.HasPrefix(p.ImageURL.URL, "https://") && !strings.HasPrefix(p.ImageURL.URL, "http://") {
				return nil, unsupported("an image URL must be http(s) or a base64 data URL")
			}
			blocks = append(blocks, anthropicBlock{Type: "image", Source: src})
		default:
			return nil, unsupported("content parts of type %q are not supported", p.Type)
		}
	}
	return blocks, nil
}

// anthropicFinish maps a stop_reason to OpenAI's finish_reason.
func anthropicFinish(stopReason string) string {
	switch stopReason {
	case "max_tokens", "model_context_window_exceeded":
		return finishLength
	case "tool_use":
		return finishToolCalls
	case "refusal":
		return finishContentFilter
	}
	return finishStop
}

// anthropicCodec translates Anthropic's answers.
type anthropicCodec struct {
	tools map[int]int // content block index → tool call index
	// jsonTool names the structured-output tool ("" when the client asked
	// for none); jsonBlock is its content block's index in a stream (-1
	// before it starts). Its input is the answer's content.
	jsonTool  string
	jsonBlock int
	// The usage counts, each updated as Anthropic reports it.
	input, cacheCreation, cacheRead, output int64
}

type anthropicUsage struct {
	InputTokens              *int64 `json:"input_tokens"`
	OutputTokens             *int64 `json:"output_tokens"`
	CacheCreationInputTokens *int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *int64 `json:"cache_read_input_tokens"`
}

type anthropicContent struct {
	Type  string          `json:"type"`
	Text  string          `json:"text"`
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicResponse struct {
	ID         string             `json:"id"`
	Model      string             `json:"model"`
	Content    []anthropicContent `json:"content"`
	StopReason string             `json:"stop_reason"`
	Usage      *anthropicUsage    `json:"usage"`
}

// addUsage takes the counts Anthropic reported (each is cumulative).
func (c *anthropicCodec) addUsage(s *streamState, u *anthropicUsage) {
	if u == nil {
		return
	}
	for _, f := range []struct {
		src *int64
		dst *int64
	}{{u.InputTokens, &c.input}, {u.CacheCreationInputTokens, &c.cacheCreation}, {u.CacheReadInputTokens, &c.cacheRead}, {u.OutputTokens, &c.output}} {
		if f.src != nil {
			*f.dst = *f.src
		}
	}
	c.sum(s)
}

// sum sets the usage from the counts so far.
func (c *anthropicCodec) sum(s *streamState) {
	s.usage.PromptTokens = c.input + c.cacheCreation + c.cacheRead
	s.usage.CompletionTokens = c.output
	s.usage.CachedTokens, s.usage.CacheWriteTokens = c.cacheRead, c.cacheCreation
	s.cached = c.cacheRead
}

func (c *anthropicCodec) whole(s *streamState, body []byte) ([]byte, error) {
	var m anthropicResponse
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("anthropic: response: %w", err)
	}
	if m.ID != "" {
		s.id = m.ID
	}
	if m.Usage != nil {
		c.addUsage(s, m.Usage)
		s.usage.Reported = true
	}
	var r reply
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			r.text.WriteString(b.Text)
		case "tool_use":
			if c.jsonTool != "" && b.Name == c.jsonTool {
				r.text.WriteString(compactArguments(b.Input))
				continue
			}
			r.addToolCall(b.ID, b.Name, compactArguments(b.Input))
		}
	}
	r.finish = anthropicFinish(m.StopReason)
	if r.finish == finishToolCalls && len(r.toolCalls) == 0 {
		r.finish = finishStop // the structured answer, not a call
	}
	return s.completion(&r)
}

// compactArguments renders a tool input object as OpenAI's arguments string.
func compactArguments(input json.RawMessage) string {
	var b bytes.Buffer
	if len(input) == 0 || json.Compact(&b, input) != nil {
		return "{}"
	}
	return b.String()
}

// event translates one stream event. It reads the event with gjson, in
// place, with no reflection: the strings it keeps beyond the event (the
// message id) are cloned, as the event's bytes are reused.
func (c *anthropicCodec) event(s *streamState, out []byte, ev sse.Event) ([]byte, error) {
	if !gjson.ValidBytes(ev.Data) {
		return out, fmt.Errorf("anthropic: %q event: not JSON", ev.Name)
	}
	e := parseInPlace(ev.Data)
	typ := e.Get("type").String()
	if typ == "" {
		typ = string(ev.Name)
	}
	switch typ {
	case "message_start":
		if m := e.Get("message"); m.IsObject() {
			if id := m.Get("id").String(); id != "" {
				s.id = strings.Clone(id)
			}
			c.addUsageJSON(s, m.Get("usage"))
		}
		return s.start(out), nil
	case "content_block_start":
		b, index := e.Get("content_block"), int(e.Get("index").Int())
		switch b.Get("type").String() {
		case "text":
			return s.content(out, b.Get("text").String()), nil
		case "tool_use":
			name := b.Get("name").String()
			if c.jsonTool != "" && name == c.jsonTool {
				c.jsonBlock = index
				return s.start(out), nil
			}
			out, c.tools[index] = s.toolCallStart(out, b.Get("id").String(), name, "")
		}
	case "content_block_delta":
		d, index := e.Get("delta"), int(e.Get("index").Int())
		switch d.Get("type").String() {
		case "text_delta":
			return s.content(out, d.Get("text").String()), nil
		case "input_json_delta":
			if c.jsonBlock >= 0 && index == c.jsonBlock {
				return s.content(out, d.Get("partial_json").String()), nil
			}
			if i, ok := c.tools[index]; ok {
				return s.toolCallArguments(out, i, d.Get("partial_json").String()), nil
			}
		}
	case "message_delta":
		if u := e.Get("usage"); u.IsObject() {
			c.addUsageJSON(s, u)
			s.usage.Reported = true
		}
		if reason := e.Get("delta.stop_reason").String(); reason != "" {
			finish := anthropicFinish(reason)
			if finish == finishToolCalls && s.toolCalls == 0 {
				finish = finishStop // the structured answer, not a call
			}
			return s.finish(out, finish), nil
		}
	case "message_stop":
		s.usage.Reported = true
		return s.close(s.finish(out, finishStop)), nil
	case "error":
		msg := "The provider failed while answering."
		if m := e.Get("error.message").String(); m != "" {
			msg += " " + truncate(m)
		}
		return s.fail(out, msg), nil
	}
	return out, nil
}

// addUsageJSON is addUsage for usage read with gjson: each count present
// replaces the one before (Anthropic's counts are cumulative).
func (c *anthropicCodec) addUsageJSON(s *streamState, u gjson.Result) {
	if !u.IsObject() {
		return
	}
	u.ForEach(func(k, v gjson.Result) bool {
		if v.Type != gjson.Number {
			return true
		}
		switch k.Str {
		case "input_tokens":
			c.input = v.Int()
		case "cache_creation_input_tokens":
			c.cacheCreation = v.Int()
		case "cache_read_input_tokens":
			c.cacheRead = v.Int()
		case "output_tokens":
			c.output = v.Int()
		}
		return true
	})
	c.sum(s)
}
func (c *anthropicCodec) end(s *streamState, out []byte) []byte {
	return s.fail(out, errEndedEarly)
}

// AnthropicRelay is the request of a Messages client passed through to a
// deployment whose Family is anthropic (an anthropic provider, or Claude
// on vertex): body is the client's Messages body, already with the
// deployment's model and the held output limit; version and beta are the
// client's anthropic-version and anthropic-beta headers (the provider's
// api_version, or the default, when the client sent none; Vertex takes
// its own version in the body instead). The Response meters Anthropic's
// answer as the adapter does (req is the chat request the body stands
// for, for the estimate of a cut answer); the bytes it translates are not
// the client's, who gets Anthropic's own.
func AnthropicRelay(req *Request, t Target, body []byte, version, beta string) (Upstream, Response, error) {
	if t.Provider.Type == config.TypeVertex {
		v, ok := adapters[config.TypeVertex].(vertex)
		if !ok {
			return Upstream{}, nil, fmt.Errorf("provider %s: no vertex adapter", t.Provider.Name)
		}
		return v.relay(req, t, body, beta)
	}
	up, err := anthropicPass(t, "/v1/messages", body, version, beta)
	if err != nil {
		return Upstream{}, nil, err
	}
	c := &anthropicCodec{tools: map[int]int{}, jsonBlock: -1}
	return up, newTranslated(req, c, defaultEnv.newID(), t.Model.ID, defaultEnv), nil
}

// AnthropicCountTokens is a count_tokens request (POST
// /v1/messages/count_tokens) to an Anthropic deployment: body is the
// client's, with the deployment's model; version and beta as for
// AnthropicRelay.
func AnthropicCountTokens(t Target, body []byte, version, beta string) (Upstream, error) {
	return anthropicPass(t, "/v1/messages/count_tokens", body, version, beta)
}

// anthropicPass is a request of a Messages client to an Anthropic
// deployment's endpoint.
func anthropicPass(t Target, endpoint string, body []byte, version, beta string) (Upstream, error) {
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, err
	}
	if version == "" {
		version = t.Provider.APIVersion
	}
	if version == "" {
		version = defaultAnthropicVersion
	}
	up := Upstream{
		Path: path + endpoint, Authority: authority, Body: body,
		Headers: []Header{{"content-type", "application/json"}, {"anthropic-version", version}},
	}
	if beta != "" {
		up.Headers = append(up.Headers, Header{"anthropic-beta", beta})
	}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"x-api-key", k})
	}
	return up, nil
}
