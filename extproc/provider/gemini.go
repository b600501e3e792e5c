package provider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/sse"
)

func init() { adapters[config.TypeGemini] = gemini{defaultEnv} }

// gemini translates to Google's Gemini API (v1beta generateContent and
// streamGenerateContent?alt=sse).
//
// Request:
//   - user and assistant messages become contents of role user and model,
//     consecutive ones of one role merged; system and developer messages,
//     wherever they are, become systemInstruction;
//   - tools become functionDeclarations (parameters as
//     parametersJsonSchema, which takes OpenAI's JSON Schema as it is);
//     tool_choice none/auto/required/a named function becomes
//     functionCallingConfig NONE/AUTO/ANY/ANY with allowedFunctionNames;
//   - Gemini has no tool call ids: answers get ids call_<answer id>_0,
//     call_<answer id>_1… (unique across a conversation), followed by the function call's thought
//     signature when it has one, which goes back on its functionCall part;
//     Gemini 3 models get Google's dummy signature where the current turn
//     needs one and the history has none (gemini_signature.go); a tool
//     message becomes a functionResponse named after the function of the
//     latest earlier tool call with its tool_call_id; its content is the
//     response if it is a JSON object, else {"content": text};
//   - the output limit held for the request (the smaller of max_tokens
//     and max_completion_tokens, else the model's configured max_tokens)
//     as maxOutputTokens; temperature (Gemini's range is 0–2 too), top_p, stop,
//     presence_penalty, frequency_penalty, seed, response_format, n
//     (candidateCount), logprobs (responseLogprobs) and top_logprobs
//     (logprobs) go into generationConfig;
//   - logit_bias, user, parallel_tool_calls false and any parameter
//     params.go does not know are refused (400 unsupported_parameter); the
//     message name field is dropped; images must be base64 data URLs.
//
// Response: the id is Gemini's responseId (or a generated one) and the
// model is the id the client asked for. Each candidate is a choice (its
// index); a candidate's logprobsResult becomes the choice's
// logprobs.content: a chosen token each, with its step's top candidates as
// top_logprobs. finishReason
// STOP becomes stop (tool_calls when the answer called a function),
// MAX_TOKENS length, any other (SAFETY, RECITATION, BLOCKLIST…) and a
// blocked prompt content_filter. completion_tokens counts thinking tokens
// too (candidatesTokenCount + thoughtsTokenCount); thought parts are not
// sent to the client.
type gemini struct{ env env }

type geminiRequest struct {
	Contents          []geminiContent         `json:"contents"`
	SystemInstruction *geminiContent          `json:"systemInstruction,omitempty"`
	Tools             []geminiTool            `json:"tools,omitempty"`
	ToolConfig        *geminiToolConfig       `json:"toolConfig,omitempty"`
	GenerationConfig  *geminiGenerationConfig `json:"generationConfig,omitempty"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is a part of a request or an answer.
type geminiPart struct {
	Text             string                  `json:"text,omitempty"`
	Thought          bool                    `json:"thought,omitempty"`
	InlineData       *geminiBlob             `json:"inlineData,omitempty"`
	FunctionCall     *geminiFunctionCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiFunctionResponse `json:"functionResponse,omitempty"`
	// ThoughtSignature is Gemini's opaque signature (base64), on a
	// functionCall part that must get it back (gemini_signature.go).
	ThoughtSignature string `json:"thoughtSignature,omitempty"`
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFunctionCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args,omitempty"`
}

type geminiFunctionResponse struct {
	Name     string          `json:"name"`
	Response json.RawMessage `json:"response"`
}

type geminiTool struct {
	FunctionDeclarations []geminiFunction `json:"functionDeclarations"`
}

type geminiFunction struct {
	Name                 string          `json:"name"`
	Description          string          `json:"description,omitempty"`
	ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type geminiToolConfig struct {
	FunctionCallingConfig geminiCallingConfig `json:"functionCallingConfig"`
}

type geminiCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type geminiGenerationConfig struct {
	Temperature        *float64        `json:"temperature,omitempty"`
	TopP               *float64        `json:"topP,omitempty"`
	MaxOutputTokens    int64           `json:"maxOutputTokens,omitempty"`
	StopSequences      []string        `json:"stopSequences,omitempty"`
	PresencePenalty    *float64        `json:"presencePenalty,omitempty"`
	FrequencyPenalty   *float64        `json:"frequencyPenalty,omitempty"`
	Seed               *int64          `json:"seed,omitempty"`
	ResponseMimeType   string          `json:"responseMimeType,omitempty"`
	ResponseJSONSchema json.RawMessage `json:"responseJsonSchema,omitempty"`
	CandidateCount     int64           `json:"candidateCount,omitempty"`
	ResponseLogprobs   bool            `json:"responseLogprobs,omitempty"`
	Logprobs           *int64          `json:"logprobs,omitempty"`
}

// Translate builds the upstream request and the answer's translator.
func (g gemini) Translate(req *Request, t Target) (Upstream, Response, error) {
	if err := checkParameters(config.TypeGemini, req.Body); err != nil {
		return Upstream{}, nil, err
	}
	cr, err := parseChatRequest(req)
	if err != nil {
		return Upstream{}, nil, err
	}
	model := strings.TrimPrefix(t.Deployment.Model, "models/")
	var modelMax int64
	if t.Model != nil {
		modelMax = int64(t.Model.MaxTokens)
	}
	body, err := geminiBody(cr, model, cr.outputLimit(modelMax))
	if err != nil {
		return Upstream{}, nil, err
	}
	authority, path, err := upstreamURL(t.Provider)
	if err != nil {
		return Upstream{}, nil, err
	}
	path += "/v1beta/models/" + url.PathEscape(model)
	if req.Stream {
		path += ":streamGenerateContent?alt=sse"
	} else {
		path += ":generateContent"
	}
	up := Upstream{
		Path:      path,
		Authority: authority,
		Body:      body,
		Headers:   []Header{{"content-type", "application/json"}},
	}
	if k := t.Provider.APIKey.Reveal(); k != "" {
		up.Headers = append(up.Headers, Header{"x-goog-api-key", k})
	}
	tr := newTranslated(req, &geminiCodec{}, g.env.newID(), t.Model.ID, g.env)
	tr.state.n = int(cr.choices())
	return up, tr, nil
}

func geminiBody(cr *openAIChatRequest, model string, limit int64) ([]byte, error) {
	var out geminiRequest
	var err error
	if out.SystemInstruction, out.Contents, err = geminiContents(cr.Messages); err != nil {
		return nil, err
	}
	if geminiValidatesSignatures(model) {
		geminiSignCurrentTurn(out.Contents)
	}
	if out.GenerationConfig, err = geminiConfig(cr, limit); err != nil {
		return nil, err
	}
	if len(cr.Tools) > 0 {
		decls := make([]geminiFunction, 0, len(cr.Tools))
		for _, tool := range cr.Tools {
			f := geminiFunction{Name: tool.Function.Name, Description: tool.Function.Description}
			if p := bytes.TrimSpace(tool.Function.Parameters); len(p) > 0 && string(p) != "null" {
				f.ParametersJSONSchema = p
			}
			decls = append(decls, f)
		}
		out.Tools = []geminiTool{{FunctionDeclarations: decls}}
		choice, err := cr.toolChoice()
		if err != nil {
			return nil, err
		}
		if mode := map[string]string{"none": "NONE", "auto": "AUTO", "required": "ANY"}[choice.mode]; mode != "" {
			out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: geminiCallingConfig{Mode: mode}}
			if choice.name != "" {
				out.ToolConfig.FunctionCallingConfig.AllowedFunctionNames = []string{choice.name}
			}
		}
	}
	return marshalJSON(out)
}

func geminiConfig(cr *openAIChatRequest, limit int64) (*geminiGenerationConfig, error) {
	stops, err := cr.stopSequences()
	if err != nil {
		return nil, err
	}
	c := geminiGenerationConfig{
		Temperature: cr.Temperature, TopP: cr.TopP, MaxOutputTokens: max(limit, 0),
		StopSequences: stops, PresencePenalty: cr.PresencePenalty, FrequencyPenalty: cr.FrequencyPenalty,
		Seed: cr.Seed,
	}
	if f := cr.ResponseFormat; f != nil {
		switch f.Type {
		case "json_object":
			c.ResponseMimeType = "application/json"
		case "json_schema":
			c.ResponseMimeType = "application/json"
			if f.JSONSchema != nil && len(f.JSONSchema.Schema) > 0 {
				c.ResponseJSONSchema = f.JSONSchema.Schema
			}
		}
	}
	if n := cr.choices(); n > 1 {
		c.CandidateCount = n
	}
	switch top := cr.TopLogprobs; {
	case cr.Logprobs != nil && *cr.Logprobs:
		c.ResponseLogprobs = true
		if top != nil && *top > 0 {
			c.Logprobs = top
		}
	case top != nil && *top > 0:
		return nil, unsupported("top_logprobs needs logprobs: true")
	}
	if c.Temperature == nil && c.TopP == nil && c.MaxOutputTokens == 0 && len(c.StopSequences) == 0 &&
		c.PresencePenalty == nil && c.FrequencyPenalty == nil && c.Seed == nil && c.ResponseMimeType == "" &&
		c.CandidateCount == 0 && !c.ResponseLogprobs {
		return nil, nil
	}
	return &c, nil
}

// geminiContents splits off the system instruction and turns the rest into
// contents, resolving each tool message's function name.
func geminiContents(msgs []ChatMessage) (*geminiContent, []geminiContent, error) {
	var system []string
	var out []geminiContent
	calls := map[string]string{} // tool call id → function name
	for i := range msgs {
		m := &msgs[i]
		var role string
		var parts []geminiPart
		var err error
		switch m.Role {
		case "system", "developer":
			var text string
			if text, err = m.text(); err == nil && text != "" {
				system = append(system, text)
			}
		case "user":
			role = "user"
			parts, err = geminiUserParts(m)
		case "assistant":
			role = "model"
			parts, err = geminiModelParts(m, calls)
		case "tool":
			role = "user"
			var part geminiPart
			part, err = geminiToolResult(m, calls)
			parts = []geminiPart{part}
		default:
			err = unsupported("role %q is not supported", m.Role)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Parts = append(out[n-1].Parts, parts...)
		} else {
			out = append(out, geminiContent{Role: role, Parts: parts})
		}
	}
	if len(system) == 0 {
		return nil, out, nil
	}
	return &geminiContent{Parts: []geminiPart{{Text: strings.Join(system, "\n\n")}}}, out, nil
}

func geminiUserParts(m *ChatMessage) ([]geminiPart, error) {
	ps, err := m.parts()
	if err != nil {
		return nil, err
	}
	var parts []geminiPart
	for _, p := range ps {
		switch p.Type {
		case "text":
			if p.Text != "" {
				parts = append(parts, geminiPart{Text: p.Text})
			}
		case "image_url":
			if p.ImageURL == nil {
				return nil, unsupported("an image_url part needs an image_url")
			}
			mt, data, ok := dataURL(p.ImageURL.URL)
			if !ok {
				return nil, unsupported("images for this model must be base64 data URLs")
			}
			parts = append(parts, geminiPart{InlineData: &geminiBlob{MimeType: mt, Data: data}})
		default:
			return nil, unsupported("content parts of type %q are not supported", p.Type)
		}
	}
	return parts, nil
}

func geminiModelParts(m *ChatMessage, calls map[string]string) ([]geminiPart, error) {
	text, err := m.text()
	if err != nil {
		return nil, err
	}
	var parts []geminiPart
	if text != "" {
		parts = append(parts, geminiPart{Text: text})
	}
	for j := range m.ToolCalls {
		call := &m.ToolCalls[j]
		args, err := toolArguments(call.Function.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tool_calls[%d]: %w", j, err)
		}
		if call.Function.Name == "" {
			return nil, unsupported("tool_calls[%d] needs a function name", j)
		}
		calls[call.ID] = call.Function.Name
		parts = append(parts, geminiPart{
			FunctionCall:     &geminiFunctionCall{Name: call.Function.Name, Args: args},
			ThoughtSignature: call.signature(),
		})
	}
	return parts, nil
}

func geminiToolResult(m *ChatMessage, calls map[string]string) (geminiPart, error) {
	text, err := m.text()
	if err != nil {
		return geminiPart{}, err
	}
	name, ok := calls[m.ToolCallID]
	if !ok {
		return geminiPart{}, unsupported("tool_call_id %q matches no tool call of an earlier assistant message", m.ToolCallID)
	}
	response := json.RawMessage(strings.TrimSpace(text))
	if len(response) == 0 || response[0] != '{' || !json.Valid(response) {
		wrapped, err := marshalJSON(map[string]string{"content": text})
		if err != nil {
			return geminiPart{}, err
		}
		response = wrapped
	}
	return geminiPart{FunctionResponse: &geminiFunctionResponse{Name: name, Response: response}}, nil
}

// geminiFinish maps a finishReason to OpenAI's finish_reason.
func geminiFinish(reason string, calledTools bool) string {
	switch reason {
	case "STOP":
		if calledTools {
			return finishToolCalls
		}
		return finishStop
	case "MAX_TOKENS":
		return finishLength
	}
	return finishContentFilter
}

type geminiCandidate struct {
	Content *struct {
		Parts []geminiPart `json:"parts"`
	} `json:"content"`
	FinishReason   string          `json:"finishReason"`
	Index          int             `json:"index"`
	LogprobsResult json.RawMessage `json:"logprobsResult"`
}

type geminiResponse struct {
	Candidates     []geminiCandidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	UsageMetadata *struct {
		PromptTokenCount        int64 `json:"promptTokenCount"`
		CandidatesTokenCount    int64 `json:"candidatesTokenCount"`
		ThoughtsTokenCount      int64 `json:"thoughtsTokenCount"`
		ToolUsePromptTokenCount int64 `json:"toolUsePromptTokenCount"`
		CachedContentTokenCount int64 `json:"cachedContentTokenCount"`
	} `json:"usageMetadata"`
	ModelVersion string `json:"modelVersion"`
	ResponseID   string `json:"responseId"`
	Error        *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// blocked reports a prompt Gemini refused: no candidate, a block reason.
func (g *geminiResponse) blocked() bool {
	return len(g.Candidates) == 0 && g.PromptFeedback != nil && g.PromptFeedback.BlockReason != ""
}

// geminiCodec translates Gemini's answers.
type geminiCodec struct{}

// meta takes the id, model and usage of one response or stream event.
func (c *geminiCodec) meta(s *streamState, g *geminiResponse) {
	if !s.begun {
		if g.ResponseID != "" {
			s.id = g.ResponseID
		}
	}
	if u := g.UsageMetadata; u != nil {
		s.usage.PromptTokens = u.PromptTokenCount + u.ToolUsePromptTokenCount
		s.usage.CompletionTokens = u.CandidatesTokenCount + u.ThoughtsTokenCount
		s.cached = u.CachedContentTokenCount
		s.usage.CachedTokens = u.CachedContentTokenCount
		s.reasoning, s.usage.ReasoningTokens = u.ThoughtsTokenCount, u.ThoughtsTokenCount
	}
}

func (c *geminiCodec) whole(s *streamState, body []byte) ([]byte, error) {
	var g geminiResponse
	if err := json.Unmarshal(body, &g); err != nil {
		return nil, fmt.Errorf("gemini: response: %w", err)
	}
	c.meta(s, &g)
	s.usage.Reported = g.UsageMetadata != nil
	if len(g.Candidates) == 0 {
		// No answer: each choice is empty, and filtered if the prompt was
		// blocked.
		finish := finishStop
		if g.blocked() {
			finish = finishContentFilter
		}
		replies := make([]*reply, s.n)
		for i := range replies {
			replies[i] = &reply{index: i, finish: finish}
		}
		return s.completion(replies...)
	}
	replies := make([]*reply, 0, len(g.Candidates))
	seen := make([]bool, s.n)
	calls := 0
	for _, cand := range g.Candidates {
		if cand.Index < 0 || cand.Index >= s.n || seen[cand.Index] {
			return nil, fmt.Errorf("gemini: response: candidate index %d of an answer with %d", cand.Index, s.n)
		}
		seen[cand.Index] = true
		r := &reply{index: cand.Index}
		if cand.Content != nil {
			for _, p := range cand.Content.Parts {
				switch {
				case p.FunctionCall != nil:
					r.addToolCall(geminiToolCallID(s.id, calls, p.ThoughtSignature), p.FunctionCall.Name, compactArguments(p.FunctionCall.Args))
					calls++
				case !p.Thought:
					r.text.WriteString(p.Text)
				}
			}
		}
		r.finish = finishStop
		if cand.FinishReason != "" {
			r.finish = geminiFinish(cand.FinishReason, len(r.toolCalls) > 0)
		}
		if lr := gjson.ParseBytes(cand.LogprobsResult); lr.IsObject() {
			r.logprobs = appendGeminiLogprobs(nil, lr)
		}
		replies = append(replies, r)
	}
	return s.completion(replies...)
}

// event translates one stream event, read with gjson in place (no
// reflection); what it keeps beyond the event (the response id) is cloned,
// as the event's bytes are reused.
func (c *geminiCodec) event(s *streamState, out []byte, ev sse.Event) ([]byte, error) {
	if !gjson.ValidBytes(ev.Data) {
		return out, fmt.Errorf("gemini: stream event: not JSON")
	}
	var cands, usage, feedback, errObj gjson.Result
	responseID := ""
	parseInPlace(ev.Data).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "candidates":
			cands = v
		case "usageMetadata":
			usage = v
		case "promptFeedback":
			feedback = v
		case "responseId":
			responseID = v.String()
		case "error":
			errObj = v
		}
		return true
	})
	if errObj.IsObject() {
		return s.fail(out, "The provider failed while answering. "+truncate(errObj.Get("message").String())), nil
	}
	if !s.begun && responseID != "" {
		s.id = strings.Clone(responseID)
	}
	if usage.IsObject() {
		var prompt, toolUse, candidates, thoughts, cached int64
		usage.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "promptTokenCount":
				prompt = v.Int()
			case "toolUsePromptTokenCount":
				toolUse = v.Int()
			case "candidatesTokenCount":
				candidates = v.Int()
			case "thoughtsTokenCount":
				thoughts = v.Int()
			case "cachedContentTokenCount":
				cached = v.Int()
			}
			return true
		})
		s.usage.PromptTokens, s.usage.CompletionTokens = prompt+toolUse, candidates+thoughts
		s.cached, s.usage.CachedTokens, s.reasoning, s.usage.ReasoningTokens = cached, cached, thoughts, thoughts
	}
	out = s.start(out)
	var err error
	some := false
	cands.ForEach(func(_, cand gjson.Result) bool {
		some = true
		out, err = c.candidate(s, out, cand)
		return err == nil
	})
	if err != nil {
		return out, err
	}
	if !some && feedback.Get("blockReason").String() != "" {
		// A blocked prompt has no candidate: every choice is filtered.
		for i := 0; i < s.n; i++ {
			_ = s.choose(i)
			out = s.finish(out, finishContentFilter)
		}
	}
	if s.allFinished() && usage.IsObject() {
		s.usage.Reported = true
	}
	return out, nil
}

// candidate translates one candidate of a stream event: its choice's text,
// tool calls, logprobs and finish reason.
func (c *geminiCodec) candidate(s *streamState, out []byte, cand gjson.Result) ([]byte, error) {
	// One pass over the candidate's fields (each Get would be another).
	var index int64
	var content, logprobs gjson.Result
	reason := ""
	cand.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "index":
			index = v.Int()
		case "content":
			content = v
		case "logprobsResult":
			logprobs = v
		case "finishReason":
			reason = v.Str
		}
		return true
	})
	if err := s.choose(int(index)); err != nil {
		return out, fmt.Errorf("gemini: stream event: %w", err)
	}
	out = s.start(out)
	if logprobs.IsObject() {
		s.lp = appendGeminiLogprobs(s.lp[:0], logprobs)
		s.logprobs = s.lp
	}
	content.Get("parts").ForEach(func(_, p gjson.Result) bool {
		var text, fc gjson.Result
		signature, thought := "", false
		p.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "text":
				text = v
			case "functionCall":
				fc = v
			case "thoughtSignature":
				signature = v.Str
			case "thought":
				thought = v.Type == gjson.True
			}
			return true
		})
		switch {
		case fc.IsObject():
			id := geminiToolCallID(s.id, s.calls, signature)
			out, _ = s.toolCallStart(out, id, fc.Get("name").String(), compactArguments(json.RawMessage(fc.Get("args").Raw)))
		case !thought:
			out = s.content(out, text.String())
		}
		return true
	})
	s.logprobs = nil // a candidate's logprobs go with its own text only
	if reason != "" {
		out = s.finish(out, geminiFinish(reason, s.toolCalls > 0))
	}
	return out, nil
}

// appendGeminiLogprobs appends OpenAI's logprobs.content array for a
// logprobsResult: one entry per chosen token, with its step's top
// candidates as top_logprobs.
func appendGeminiLogprobs(out []byte, lr gjson.Result) []byte {
	top := lr.Get("topCandidates").Array()
	out = append(out, '[')
	i := 0
	lr.Get("chosenCandidates").ForEach(func(_, chosen gjson.Result) bool {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendTokenLogprob(out, chosen)
		out = append(out, `,"top_logprobs":[`...)
		if i < len(top) {
			j := 0
			top[i].Get("candidates").ForEach(func(_, alt gjson.Result) bool {
				if j > 0 {
					out = append(out, ',')
				}
				out = append(appendTokenLogprob(out, alt), '}')
				j++
				return true
			})
		}
		out = append(out, "]}"...)
		i++
		return true
	})
	return append(out, ']')
}

// appendTokenLogprob appends an unclosed {"token":…,"logprob":…,"bytes":[…]}
// for one of Gemini's logprob candidates.
func appendTokenLogprob(out []byte, c gjson.Result) []byte {
	token := c.Get("token").String()
	out = append(out, `{"token":`...)
	out = appendJSONString(out, token)
	out = append(out, `,"logprob":`...)
	out = strconv.AppendFloat(out, c.Get("logProbability").Float(), 'g', -1, 64)
	out = append(out, `,"bytes":[`...)
	for i := 0; i < len(token); i++ {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, int64(token[i]), 10)
	}
	return append(out, ']')
}

// end closes the stream: Gemini's has no end marker of its own, so a stream
// that ends after a finishReason is complete.
func (c *geminiCodec) end(s *streamState, out []byte) []byte {
	if s.allFinished() {
		return s.close(out)
	}
	return s.fail(out, errEndedEarly)
}
