package provider

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/sse"
)

func init() {
	adapters[config.TypeBedrock] = bedrock{env: defaultEnv, creds: defaultBedrockCredentials}
}

// bedrock translates to Amazon Bedrock's Converse API: POST
// {base_url}/model/{modelId}/converse, or /converse-stream for a stream,
// whose answer is AWS's binary event stream (application/vnd.amazon.eventstream).
// The request is signed with SigV4 (bedrock_sign.go), or carries the
// provider's Bedrock API key as a bearer token.
//
// Request:
//   - system and developer messages, wherever they are, become the
//     top-level system blocks; tool messages become user messages of
//     toolResult blocks, and consecutive messages of one role are merged,
//     since Bedrock wants user and assistant to alternate;
//   - assistant tool calls become toolUse blocks; images must be base64
//     data URLs (png, jpeg, gif or webp), as Bedrock fetches no URL;
//   - inferenceConfig takes the held output limit as maxTokens,
//     temperature (capped at 1, the range of Bedrock's models), topP and
//     stop as stopSequences;
//   - tools become toolConfig.tools (toolSpec), tool_choice auto, required
//     and a named function toolChoice auto, any and tool; none sends no
//     tools, which Bedrock allows only while the conversation has no tool
//     calls;
//   - everything else with no Converse counterpart is refused (params.go).
//
// Response: the id is Tollgate's (Bedrock gives none), created the time
// Tollgate sent the request. stopReason end_turn and stop_sequence become
// stop, max_tokens and model_context_window_exceeded length, tool_use
// tool_calls, guardrail_intervened and content_filtered content_filter.
// prompt_tokens counts cached input too (inputTokens +
// cacheReadInputTokens + cacheWriteInputTokens), as OpenAI's does.
type bedrock struct {
	env   env
	creds *bedrockCredentials
}

type bedrockRequest struct {
	Messages        []bedrockMessage   `json:"messages"`
	System          []bedrockSystem    `json:"system,omitempty"`
	InferenceConfig bedrockInference   `json:"inferenceConfig"`
	ToolConfig      *bedrockToolConfig `json:"toolConfig,omitempty"`
}

type bedrockText struct {
	Text string `json:"text"`
}

type bedrockMessage struct {
	Role    string         `json:"role"`
	Content []bedrockBlock `json:"content"`
}

// bedrockCachePoint ends a prompt prefix Bedrock caches: a block of its
// own after the system text, tool or content block that ends the prefix.
type bedrockCachePoint struct {
	Type string `json:"type"` // "default"
}

// cachePointDefault is the one kind of cache point.
var cachePointDefault = &bedrockCachePoint{Type: "default"}

// bedrockSystem is a system block: text, or a cache point.
type bedrockSystem struct {
	Text       *string            `json:"text,omitempty"`
	CachePoint *bedrockCachePoint `json:"cachePoint,omitempty"`
}

// bedrockBlock is one content block: exactly one field is set.
type bedrockBlock struct {
	Text       *string            `json:"text,omitempty"`
	Image      *bedrockImage      `json:"image,omitempty"`
	ToolUse    *bedrockToolUse    `json:"toolUse,omitempty"`
	ToolResult *bedrockToolResult `json:"toolResult,omitempty"`
	CachePoint *bedrockCachePoint `json:"cachePoint,omitempty"`
}

type bedrockImage struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"`
	} `json:"source"`
}

type bedrockToolUse struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type bedrockToolResult struct {
	ToolUseID string        `json:"toolUseId"`
	Content   []bedrockText `json:"content"`
}

type bedrockInference struct {
	MaxTokens     int64    `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type bedrockToolConfig struct {
	Tools      []bedrockTool `json:"tools"`
	ToolChoice any           `json:"toolChoice,omitempty"`
}

// bedrockTool is a tool's spec, or a cache point after the tools before it.
type bedrockTool struct {
	ToolSpec   *bedrockToolSpec   `json:"toolSpec,omitempty"`
	CachePoint *bedrockCachePoint `json:"cachePoint,omitempty"`
}

type bedrockToolSpec struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	InputSchema struct {
		JSON json.RawMessage `json:"json"`
	} `json:"inputSchema"`
}

// Translate builds the upstream request, signed, and the answer's
// translator.
func (b bedrock) Translate(req *Request, t Target) (Upstream, Response, error) {
	if err := checkParameters(config.TypeBedrock, req.Body); err != nil {
		return Upstream{}, nil, err
	}
	cr, err := parseChatRequest(req)
	if err != nil {
		return Upstream{}, nil, err
	}
	body, err := bedrockBody(cr, t)
	if err != nil {
		return Upstream{}, nil, err
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	op, accept := "/converse", "application/json"
	if req.Stream {
		op, accept = "/converse-stream", BedrockStreamType
	}
	up := Upstream{
		Path:      path + "/model/" + bedrockModelPath(t.Deployment.Model) + op,
		Authority: authority,
		Body:      body,
		Headers:   []Header{{"content-type", "application/json"}, {"accept", accept}},
	}
	if err := b.authorize(&up, t.Provider); err != nil {
		return Upstream{}, nil, err
	}
	c := &bedrockCodec{tools: map[int64]int{}, jsonBlock: -1}
	if cr.structuredOutput() {
		c.jsonTool = bedrockJSONTool
	}
	tr := newTranslated(req, c, b.env.newID(), t.Model.ID, b.env)
	return up, &bedrockAnswer{translated: tr, codec: c}, nil
}

// BedrockStreamType is the content type of AWS's event stream, which a
// Bedrock stream's attempt sends as its accept.
const BedrockStreamType = "application/vnd.amazon.eventstream"

// bedrockModelPath is a model id (or ARN) as one path segment: ARNs'
// slashes and model versions' colons escaped, as AWS's SDKs send them.
func bedrockModelPath(model string) string {
	return strings.ReplaceAll(url.PathEscape(model), ":", "%3A")
}

func bedrockBody(cr *openAIChatRequest, t Target) ([]byte, error) {
	system, msgs, err := bedrockMessages(cr.Messages)
	if err != nil {
		return nil, err
	}
	out := bedrockRequest{Messages: msgs, System: system}
	modelMax := int64(0)
	if t.Model != nil {
		modelMax = int64(t.Model.MaxTokens)
	}
	out.InferenceConfig.MaxTokens = cr.outputLimit(modelMax)
	out.InferenceConfig.TopP = cr.TopP
	if cr.Temperature != nil {
		temp := min(*cr.Temperature, 1)
		out.InferenceConfig.Temperature = &temp
	}
	if out.InferenceConfig.StopSequences, err = cr.stopSequences(); err != nil {
		return nil, err
	}
	choice, err := cr.toolChoice()
	if err != nil {
		return nil, err
	}
	var tc *bedrockToolConfig
	if len(cr.Tools) > 0 && choice.mode != "none" {
		tc = &bedrockToolConfig{}
		for _, tool := range cr.Tools {
			bt := bedrockTool{ToolSpec: &bedrockToolSpec{}}
			bt.ToolSpec.Name, bt.ToolSpec.Description = tool.Function.Name, tool.Function.Description
			schema := tool.Function.Parameters
			if len(bytes.TrimSpace(schema)) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{"type":"object","properties":{}}`)
			}
			bt.ToolSpec.InputSchema.JSON = schema
			tc.Tools = append(tc.Tools, bt)
			if marked(tool.CacheControl) {
				tc.Tools = append(tc.Tools, bedrockTool{CachePoint: cachePointDefault})
			}
		}
		switch {
		case choice.name != "":
			tc.ToolChoice = map[string]any{"tool": map[string]string{"name": choice.name}}
		case choice.mode == "required":
			tc.ToolChoice = map[string]any{"any": struct{}{}}
		case choice.mode == "auto":
			tc.ToolChoice = map[string]any{"auto": struct{}{}}
		}
	} else if choice.mode == "none" && toolHistory(cr.Messages) && !cr.structuredOutput() {
		return nil, unsupported(`tool_choice "none" cannot be sent to Bedrock with tool calls in the conversation; remove tool_choice`)
	}
	if cr.structuredOutput() {
		if tc, err = bedrockStructured(cr, tc, choice); err != nil {
			return nil, err
		}
	}
	if tc != nil {
		out.ToolConfig = tc
	}
	return marshalJSON(out)
}

// bedrockJSONTool is the tool that carries structured output
// (response_format json_object or json_schema) on Bedrock.
const bedrockJSONTool = "json_answer"

// bedrockStructured adds the structured-output tool to the request's tools
// (tc, nil without the client's): a tool whose input schema is the one
// asked for (an object, for json_object), whose input is handed back as the
// message's content. Without tools of the client's (or with tool_choice
// none) it is forced; with them, some tool must be used — the client's, or
// this one for the final answer.
func bedrockStructured(cr *openAIChatRequest, tc *bedrockToolConfig, choice toolChoice) (*bedrockToolConfig, error) {
	clientTools := tc != nil
	if !clientTools {
		tc = &bedrockToolConfig{}
	}
	for _, tool := range tc.Tools {
		if tool.ToolSpec != nil && tool.ToolSpec.Name == bedrockJSONTool {
			return nil, unsupported("response_format cannot be used with a tool named %q", bedrockJSONTool)
		}
	}
	schema := json.RawMessage(`{"type":"object"}`)
	if f := cr.ResponseFormat; f.JSONSchema != nil && len(bytes.TrimSpace(f.JSONSchema.Schema)) > 0 && string(f.JSONSchema.Schema) != "null" {
		schema = f.JSONSchema.Schema
	}
	bt := bedrockTool{ToolSpec: &bedrockToolSpec{}}
	bt.ToolSpec.Name = bedrockJSONTool
	bt.ToolSpec.Description = "Give the final answer as this tool's input: a JSON object that matches its schema."
	bt.ToolSpec.InputSchema.JSON = schema
	tc.Tools = append(tc.Tools, bt)
	switch {
	case !clientTools:
		tc.ToolChoice = map[string]any{"tool": map[string]string{"name": bedrockJSONTool}}
	case choice.name != "":
	default:
		tc.ToolChoice = map[string]any{"any": struct{}{}}
	}
	return tc, nil
}

// bedrockMessages splits off the system blocks and turns the rest into
// alternating user and assistant messages.
func bedrockMessages(msgs []ChatMessage) ([]bedrockSystem, []bedrockMessage, error) {
	_, turns, err := alternate(msgs, turnBlocks[bedrockBlock]{
		user: bedrockUserBlocks,
		text: func(text string) bedrockBlock { return bedrockBlock{Text: &text} },
		toolCall: func(id, name string, args json.RawMessage) bedrockBlock {
			return bedrockBlock{ToolUse: &bedrockToolUse{ToolUseID: id, Name: name, Input: args}}
		},
		toolResult: func(id, text string) bedrockBlock {
			return bedrockBlock{ToolResult: &bedrockToolResult{ToolUseID: id, Content: []bedrockText{{Text: text}}}}
		},
		cachePoint: func() bedrockBlock { return bedrockBlock{CachePoint: cachePointDefault} },
	})
	if err != nil {
		return nil, nil, err
	}
	out := make([]bedrockMessage, len(turns))
	for i, t := range turns {
		out[i] = bedrockMessage{Role: t.role, Content: t.blocks}
	}
	system, err := bedrockSystemBlocks(msgs)
	return system, out, err
}

// bedrockSystemBlocks are the system and developer messages' texts (which
// alternate has checked are text), each a system block, with a cache point
// after a part marked cache_control.
func bedrockSystemBlocks(msgs []ChatMessage) ([]bedrockSystem, error) {
	var out []bedrockSystem
	for i := range msgs {
		m := &msgs[i]
		if m.Role != "system" && m.Role != "developer" {
			continue
		}
		ps, err := m.parts()
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		var text strings.Builder
		for _, p := range ps {
			text.WriteString(p.Text)
			if marked(p.CacheControl) && text.Len() > 0 {
				t := text.String()
				out = append(out, bedrockSystem{Text: &t}, bedrockSystem{CachePoint: cachePointDefault})
				text.Reset()
			}
		}
		if text.Len() > 0 {
			t := text.String()
			out = append(out, bedrockSystem{Text: &t})
		}
	}
	return out, nil
}

// toolHistory reports tool calls or results among the messages.
func toolHistory(msgs []ChatMessage) bool {
	for i := range msgs {
		if msgs[i].Role == "tool" || len(msgs[i].ToolCalls) > 0 {
			return true
		}
	}
	return false
}

// bedrockImageFormats are the image formats Converse takes, by media type.
var bedrockImageFormats = map[string]string{
	"image/png": "png", "image/jpeg": "jpeg", "image/jpg": "jpeg", "image/gif": "gif", "image/webp": "webp",
}

func bedrockUserBlocks(m *ChatMessage) ([]bedrockBlock, error) {
	parts, err := m.parts()
	if err != nil {
		return nil, err
	}
	var blocks []bedrockBlock
	for _, p := range parts {
		switch p.Type {
		case "text":
			if p.Text != "" {
				blocks = append(blocks, bedrockBlock{Text: &p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, unsupported("an image_url part needs an image_url")
			}
			mt, data, ok := dataURL(p.ImageURL.URL)
			format := bedrockImageFormats[mt]
			if !ok || format == "" {
				return nil, unsupported("Bedrock takes images as base64 data URLs of PNG, JPEG, GIF or WebP only")
			}
			img := &bedrockImage{Format: format}
			img.Source.Bytes = data
			blocks = append(blocks, bedrockBlock{Image: img})
		default:
			return nil, unsupported("content parts of type %q are not supported", p.Type)
		}
		if marked(p.CacheControl) && len(blocks) > 0 {
			blocks = append(blocks, bedrockBlock{CachePoint: cachePointDefault})
		}
	}
	return blocks, nil
}

// bedrockFinish maps a stopReason to OpenAI's finish_reason.
func bedrockFinish(stopReason string) string {
	switch stopReason {
	case "max_tokens", "model_context_window_exceeded":
		return finishLength
	case "tool_use":
		return finishToolCalls
	case "guardrail_intervened", "content_filtered":
		return finishContentFilter
	}
	return finishStop
}

// bedrockCodec translates Bedrock's answers: a whole Converse body, or the
// events of a ConverseStream (frame).
type bedrockCodec struct {
	tools map[int64]int // contentBlockIndex → tool call index
	// jsonTool names the structured-output tool ("" when the client asked
	// for none); jsonBlock is its content block's index in a stream (-1
	// before it starts). Its input is the answer's content.
	jsonTool  string
	jsonBlock int64
	stopped   bool // messageStop is translated
}

// usage takes Bedrock's usage object (inputTokens excludes the cache's).
func (c *bedrockCodec) usage(s *streamState, u gjson.Result) {
	if !u.IsObject() {
		return
	}
	read, write := u.Get("cacheReadInputTokens").Int(), u.Get("cacheWriteInputTokens").Int()
	s.usage.PromptTokens = u.Get("inputTokens").Int() + read + write
	s.usage.CompletionTokens = u.Get("outputTokens").Int()
	s.usage.CachedTokens, s.usage.CacheWriteTokens = read, write
	s.cached = read
	s.usage.Reported = true
}

func (c *bedrockCodec) whole(s *streamState, body []byte) ([]byte, error) {
	if !gjson.ValidBytes(body) {
		return nil, errors.New("bedrock: response: not JSON")
	}
	m := gjson.ParseBytes(body)
	msg := m.Get("output.message")
	if !msg.IsObject() {
		return nil, errors.New("bedrock: response: no output.message")
	}
	c.usage(s, m.Get("usage"))
	var r reply
	for _, b := range msg.Get("content").Array() {
		switch {
		case b.Get("text").Type == gjson.String:
			r.text.WriteString(b.Get("text").String())
		case b.Get("reasoningContent").IsObject():
			// reasoningText's text; its signature and a redactedContent
			// block have no place in OpenAI's answer.
			r.reasoning.WriteString(b.Get("reasoningContent.reasoningText.text").String())
		case b.Get("toolUse").IsObject():
			tu := b.Get("toolUse")
			if c.jsonTool != "" && tu.Get("name").String() == c.jsonTool {
				r.text.WriteString(compactArguments(json.RawMessage(tu.Get("input").Raw)))
				continue
			}
			r.addToolCall(tu.Get("toolUseId").String(), tu.Get("name").String(), compactArguments(json.RawMessage(tu.Get("input").Raw)))
		}
	}
	r.finish = bedrockFinish(m.Get("stopReason").String())
	if r.finish == finishToolCalls && len(r.toolCalls) == 0 {
		r.finish = finishStop // the structured answer, not a call
	}
	return s.completion(&r)
}

// event is not used: Bedrock streams AWS event-stream frames, not SSE.
func (c *bedrockCodec) event(_ *streamState, out []byte, _ sse.Event) ([]byte, error) {
	return out, errors.New("bedrock: an SSE event in an event stream")
}

// end closes a stream whose messageStop came (the usage is then
// estimated if no metadata followed), and fails one cut before it.
func (c *bedrockCodec) end(s *streamState, out []byte) []byte {
	if c.stopped {
		return s.close(out)
	}
	return s.fail(out, errEndedEarly)
}

// frame translates one event-stream message.
func (c *bedrockCodec) frame(s *streamState, out []byte, m eventstream.Message) ([]byte, error) {
	header := func(name string) string {
		if v := m.Headers.Get(name); v != nil {
			if sv, ok := v.(eventstream.StringValue); ok {
				return string(sv)
			}
		}
		return ""
	}
	switch header(":message-type") {
	case "exception":
		msg := "The provider failed while answering."
		if text := gjson.GetBytes(m.Payload, "message").String(); text != "" {
			msg += " " + truncate(text)
		} else if kind := header(":exception-type"); kind != "" {
			msg += " " + truncate(kind)
		}
		return s.fail(out, msg), nil
	case "error":
		return s.fail(out, "The provider failed while answering. "+truncate(header(":error-message"))), nil
	case "event":
	default:
		return out, fmt.Errorf("bedrock: a message of type %q", header(":message-type"))
	}
	if !gjson.ValidBytes(m.Payload) {
		return out, fmt.Errorf("bedrock: %q event: not JSON", header(":event-type"))
	}
	e := parseInPlace(m.Payload)
	switch header(":event-type") {
	case "messageStart":
		return s.start(out), nil
	case "contentBlockStart":
		if tu := e.Get("start.toolUse"); tu.IsObject() {
			if c.jsonTool != "" && tu.Get("name").String() == c.jsonTool {
				c.jsonBlock = e.Get("contentBlockIndex").Int()
				return s.start(out), nil
			}
			var i int
			out, i = s.toolCallStart(out, tu.Get("toolUseId").String(), tu.Get("name").String(), "")
			c.tools[e.Get("contentBlockIndex").Int()] = i
		}
	case "contentBlockDelta":
		d := e.Get("delta")
		if t := d.Get("text"); t.Type == gjson.String {
			return s.content(out, t.String()), nil
		}
		if t := d.Get("reasoningContent.text"); t.Type == gjson.String {
			// A reasoning block's signature and redactedContent deltas have
			// no place in OpenAI's chunks.
			return s.reasoningContent(out, t.String()), nil
		}
		if in := d.Get("toolUse.input"); in.Type == gjson.String {
			if c.jsonBlock >= 0 && e.Get("contentBlockIndex").Int() == c.jsonBlock {
				return s.content(out, in.String()), nil
			}
			if i, ok := c.tools[e.Get("contentBlockIndex").Int()]; ok {
				return s.toolCallArguments(out, i, in.String()), nil
			}
		}
	case "messageStop":
		c.stopped = true
		finish := bedrockFinish(e.Get("stopReason").String())
		if finish == finishToolCalls && s.toolCalls == 0 {
			finish = finishStop // the structured answer, not a call
		}
		return s.finish(out, finish), nil
	case "metadata":
		c.usage(s, e.Get("usage"))
		if c.stopped {
			return s.close(out), nil
		}
	}
	return out, nil
}

// bedrockAnswer is the Response of a Bedrock request: a whole answer and
// an error body as every translating adapter's (translated); a stream
// decoded frame by frame with aws-sdk-go-v2's event-stream decoder.
type bedrockAnswer struct {
	*translated
	codec   *bedrockCodec
	dec     eventstream.Decoder
	pending []byte // bytes of frames not yet whole
	payload []byte // the decoder's payload buffer, reused
}

// maxBedrockFrame bounds one event-stream frame: AWS's 16 MiB payload
// and 128 KiB of headers, with the frame's own 16 bytes.
const maxBedrockFrame = 16<<20 + 128<<10 + 16

// bedrockLengthBytes is a frame's leading total-length field (big-endian),
// which says where the frame ends; a frame is never shorter than
// bedrockMinFrame, its prelude and two CRCs.
const (
	bedrockLengthBytes = 4
	bedrockMinFrame    = 16
)

// Body translates the provider's answer; a stream is cut into frames by
// their length prefix and each decoded (CRCs checked) by the SDK's decoder.
func (r *bedrockAnswer) Body(piece []byte, end bool) ([]byte, error) {
	if r.fail != nil || !r.stream {
		return r.translated.Body(piece, end)
	}
	if r.state.done || r.stopped {
		return nil, nil
	}
	r.pending = append(r.pending, piece...)
	out := r.out[:0]
	defer func() { r.out, r.payload = reuse(out), reuse(r.payload) }()
	consumed := 0
	for !r.state.done && len(r.pending)-consumed >= bedrockLengthBytes {
		buf := r.pending[consumed:]
		n := int(binary.BigEndian.Uint32(buf))
		if n < bedrockMinFrame || n > maxBedrockFrame {
			r.stopped = true
			return out, fmt.Errorf("bedrock: an event-stream frame of %d bytes", n)
		}
		if len(buf) < n {
			break
		}
		m, err := r.dec.Decode(bytes.NewReader(buf[:n]), r.payload[:0])
		if err != nil {
			r.stopped = true
			return out, fmt.Errorf("bedrock: event stream: %w", err)
		}
		r.payload = m.Payload
		consumed += n
		if out, err = r.codec.frame(&r.state, out, m); err != nil {
			r.stopped = true
			return out, err
		}
	}
	r.pending = append(reuse(r.pending), r.pending[consumed:]...)
	if end && !r.state.done {
		out = r.codec.end(&r.state, out)
		r.state.done = true
	}
	return out, nil
}
