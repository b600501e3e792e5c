package extproc

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"unsafe"

	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/oaierror"
)

// validChat is what the router step learns from a valid body.
type validChat struct {
	Model *config.Model
	// Asked is the model the client named (set whenever the body names
	// one, also when validation fails), for counting refusals.
	Asked       string
	Stream      bool
	ClientUsage bool
	// MaxTokens is the client's max_tokens (or max_completion_tokens), or
	// the model's maximum when it sent neither.
	MaxTokens int64
	// Choices is the client's n: how many answers the provider writes, each
	// up to MaxTokens (1 when absent).
	Choices int64
	// LimitSent is true when the body already gives MaxTokens as its only
	// output limit; otherwise the router step writes it in (see limitBody).
	LimitSent bool
	// Images and Files count the image and file parts of the messages:
	// prompt costs the body's size does not show.
	Images, Files int64
	// PromptBound is the most prompt tokens the body can cost at any
	// provider (promptBound); the hold caps it (promptTokensHeld).
	PromptBound int64
	// Units is the most search units a rerank request can be billed (see
	// checkRerank), held for a model priced by them.
	Units int64
	tally promptTally
}

// MaxChoices is the largest n a request may ask for (OpenAI's own limit).
const MaxChoices = 128

// MaxJSONDepth is the deepest nesting of arrays and objects a request body
// may have. OpenAI's own bodies need a handful of levels; JSON schemas in
// tools and response formats a few dozen at most.
const MaxJSONDepth = 64

// tooDeep reports whether body nests arrays and objects more than limit
// deep, in one pass with no recursion and no allocation. It reads brackets
// outside strings only and does not otherwise check the JSON. A string is
// skipped to its closing quote (one not escaped: preceded by an even run
// of backslashes) by IndexByte, which reads many bytes at a time: a
// prompt is mostly strings.
func tooDeep(body []byte, limit int) bool {
	depth := 0
	for i := 0; i < len(body); i++ {
		switch body[i] {
		case '"':
			end := closingQuote(body, i)
			if end < 0 {
				return false // an unterminated string: the validator refuses it
			}
			i = end
		case '[', '{':
			depth++
			if depth > limit {
				return true
			}
		case ']', '}':
			depth--
		}
	}
	return false
}

// closingQuote is the index of the quote that ends the string opened at
// body[open], or -1.
func closingQuote(body []byte, open int) int {
	for j := open + 1; ; j++ {
		k := bytes.IndexByte(body[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		run := 0
		for b := j - 1; b > open && body[b] == '\\'; b-- {
			run++
		}
		if run%2 == 0 {
			return j
		}
	}
}

// validRoles are the message roles: "developer" is OpenAI's newer name for
// system (OpenAI and Azure take it as it is; Anthropic and Gemini get it as
// their system instruction).
var validRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// validate checks a chat-completion body against the rules of docs/api.md (Chat completions) without
// decoding it into structs. The first problem found is returned as the
// client-facing error; a nil error means the body may go to a provider.
func validate(body []byte, cfg *config.Config) (validChat, *oaierror.Error) {
	var top fields
	if e := topLevel(body, &top); e != nil {
		return validChat{}, e
	}
	var r validChat
	model := top.model
	if model.Type != gjson.String || model.Str == "" {
		return validChat{}, invalid("invalid_model", "model", "You must provide a model parameter (a string).")
	}
	// A copy: the body's bytes are the parse's, and Asked outlives them.
	asked := strings.Clone(model.Str)
	m, ok := cfg.Model(model.Str)
	if !ok {
		return validChat{Asked: asked}, invalid("invalid_model", "model", "The model %q does not exist.", truncate(model.Str))
	}
	if m.Kind != config.KindChat {
		return validChat{Asked: asked}, wrongKind(m)
	}
	r.Model, r.Asked = m, asked
	for _, check := range [...]func(*fields, *validChat) *oaierror.Error{
		func(top *fields, r *validChat) *oaierror.Error { return validateMessages(top.messages, m, r) },
		validateStream, validateRanges, validateLimits, validateWindow,
		func(top *fields, _ *validChat) *oaierror.Error { return checkUnpriced(top, m) },
		validateChoices, validateStop,
	} {
		if e := check(&top, &r); e != nil {
			return validChat{Asked: asked}, e
		}
	}
	tallyTopLevel(&top, &r.tally)
	r.PromptBound = promptBound(body, &r)
	return r, nil
}

// invalid is a 400 invalid_request_error with the code, the parameter and
// the message.
func invalid(code, param, format string, args ...any) *oaierror.Error {
	e := oaierror.Invalid(code, param, fmt.Sprintf(format, args...))
	return &e
}

// topLevel reads the body's top-level values, once, into top: each later
// check reads them from that table (filled in place: a copy of it returned
// would put the table twice on the stack of a stream's goroutine, which
// keeps the size it grows to).
func topLevel(body []byte, top *fields) *oaierror.Error {
	// Nesting first, without recursion: the JSON validator and every walk
	// after it recurse, and a body of a few megabytes of brackets would
	// otherwise cost gigabytes of stack, or the process.
	if tooDeep(body, MaxJSONDepth) {
		return invalid("invalid_request", "", "The request body nests JSON deeper than %d levels.", MaxJSONDepth)
	}
	if !gjson.ValidBytes(body) {
		return invalid("invalid_request", "", "The request body is not valid JSON.")
	}
	// Read the body in place (no copy into a string) and walk its top
	// level once; a value is looked up later by name from this table.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(body), len(body)))
	if !root.IsObject() {
		return invalid("invalid_request", "", "The request body must be a JSON object.")
	}
	dup := ""
	root.ForEach(func(k, v gjson.Result) bool {
		if !top.set(k.Str, v) {
			dup = k.Str
			return false
		}
		return true
	})
	if dup != "" {
		// Parsers disagree on which copy wins; a validated value must be
		// the one the provider uses, so an ambiguous body is refused.
		return invalid("invalid_request", dup, "The request body gives %q more than once.", dup)
	}
	return nil
}

func validateStream(top *fields, r *validChat) *oaierror.Error {
	if s := top.stream; s.Exists() && s.Type != gjson.Null {
		if s.Type != gjson.True && s.Type != gjson.False {
			return invalid("invalid_request", "stream", "stream must be a boolean.")
		}
		r.Stream = s.Type == gjson.True
	}
	if so := top.streamOptions; so.Exists() && so.Type != gjson.Null {
		if !so.IsObject() {
			return invalid("invalid_request", "stream_options", "stream_options must be an object.")
		}
		if !r.Stream {
			return invalid("invalid_request", "stream_options", "stream_options is only allowed when stream is true.")
		}
		iu := so.Get("include_usage")
		if iu.Exists() && iu.Type != gjson.True && iu.Type != gjson.False && iu.Type != gjson.Null {
			return invalid("invalid_request", "stream_options.include_usage", "include_usage must be a boolean.")
		}
		r.ClientUsage = iu.Type == gjson.True
	}
	return nil
}

func validateRanges(top *fields, _ *validChat) *oaierror.Error {
	ranges := [...]struct {
		name, code string
		min, max   float64
		v          gjson.Result
	}{
		{"temperature", "invalid_temperature", 0, 2, top.temperature},
		{"top_p", "invalid_request", 0, 1, top.topP},
		{"frequency_penalty", "invalid_request", -2, 2, top.frequencyPenalty},
		{"presence_penalty", "invalid_request", -2, 2, top.presencePenalty},
	}
	for _, rg := range ranges {
		v := rg.v
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		if v.Type != gjson.Number || math.IsNaN(v.Num) || v.Num < rg.min || v.Num > rg.max {
			return invalid(rg.code, rg.name, "%s must be a number from %g to %g.", rg.name, rg.min, rg.max)
		}
	}
	return nil
}

// validateLimits checks the output limits and sets the one held: the
// smaller of the client's, or the model's maximum.
func validateLimits(top *fields, r *validChat) *oaierror.Error {
	m := r.Model
	r.MaxTokens = int64(m.MaxTokens)
	limits := 0
	for _, mt := range [...]struct {
		name string
		v    gjson.Result
	}{{"max_tokens", top.maxTokens}, {"max_completion_tokens", top.maxCompletionTokens}} {
		name, v := mt.name, mt.v
		if !v.Exists() || v.Type == gjson.Null {
			continue
		}
		if v.Type != gjson.Number || v.Num != math.Trunc(v.Num) {
			return invalid("invalid_max_tokens", name, "%s must be an integer.", name)
		}
		if v.Num < 1 {
			return invalid("invalid_max_tokens", name, "%s must be at least 1.", name)
		}
		if v.Num > float64(m.MaxTokens) {
			return invalid("invalid_max_tokens", name, "%s is too large: %s allows at most %d.", name, m.ID, m.MaxTokens)
		}
		r.MaxTokens = min(r.MaxTokens, int64(v.Num))
		limits++
	}
	r.LimitSent = limits == 1 && (top.maxTokens.Num == float64(r.MaxTokens) || top.maxCompletionTokens.Num == float64(r.MaxTokens))
	return nil
}

func validateChoices(top *fields, r *validChat) *oaierror.Error {
	r.Choices = 1
	if n := top.n; n.Exists() && n.Type != gjson.Null {
		if n.Type != gjson.Number || n.Num != math.Trunc(n.Num) || n.Num < 1 || n.Num > MaxChoices {
			return invalid("invalid_request", "n", "n must be an integer from 1 to %d.", MaxChoices)
		}
		r.Choices = int64(n.Num)
	}
	return nil
}

func validateStop(top *fields, _ *validChat) *oaierror.Error {
	stop := top.stop
	switch {
	case !stop.Exists() || stop.Type == gjson.Null, stop.Type == gjson.String:
		return nil
	case stop.IsArray():
		n := 0
		bad := false
		stop.ForEach(func(_, v gjson.Result) bool {
			n++
			bad = v.Type != gjson.String
			return !bad
		})
		if bad {
			return invalid("invalid_stop", "stop", "stop must be a string or an array of strings.")
		}
		if n > 4 {
			return invalid("invalid_stop", "stop", "stop allows at most 4 sequences; got %d.", n)
		}
		return nil
	}
	return invalid("invalid_stop", "stop", "stop must be a string or an array of strings.")
}

// checkUnpriced refuses a price-changing parameter the model does not
// allow (provider.UnpricedAllowance, config.Model.AllowParameters).
func checkUnpriced(top *fields, m *config.Model) *oaierror.Error {
	for i, name := range unpricedNames {
		allowance := provider.UnpricedAllowance(name, top.unpriced[i])
		if allowance == "" || m.Allows(allowance) {
			continue
		}
		e := oaierror.Invalid("unsupported_parameter", name, fmt.Sprintf(
			"The parameter %q changes what a request costs, and the model %q is not priced for it; remove it or choose another model.", name, truncate(m.ID)))
		return &e
	}
	return nil
}

// unpricedNames are the top-level parameters checkUnpriced reads, in the
// order of fields.unpriced.
var unpricedNames = [...]string{"service_tier", "modalities", "audio", "store", "prediction", "web_search_options", "moderation"}

func validateMessages(msgs gjson.Result, model *config.Model, r *validChat) *oaierror.Error {
	bad := func(format string, args ...any) *oaierror.Error {
		e := oaierror.Invalid("invalid_messages", "messages", fmt.Sprintf(format, args...))
		return &e
	}
	if !msgs.Exists() {
		return bad("messages is required: an array with at least one message.")
	}
	if !msgs.IsArray() {
		return bad("messages must be an array of message objects.")
	}
	var e *oaierror.Error
	i := 0
	msgs.ForEach(func(_, m gjson.Result) bool {
		var content gjson.Result
		content, e = validateMessage(i, m, bad, &r.tally)
		if e == nil && content.IsArray() {
			e = countParts(i, content, model, r)
		}
		i++
		return e == nil
	})
	if e != nil {
		return e
	}
	if i == 0 {
		return bad("messages must contain at least one message.")
	}
	return nil
}

// validateMessage checks message i and counts it for the prompt bound; it
// returns the message's content, read in the same walk of the message (a
// long content is read once).
func validateMessage(i int, m gjson.Result, bad func(string, ...any) *oaierror.Error, t *promptTally) (content gjson.Result, _ *oaierror.Error) {
	if !m.IsObject() {
		return content, bad("messages[%d] must be an object.", i)
	}
	var role, name, toolCalls, toolCallID gjson.Result
	m.ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "role":
			role = v
		case "name":
			name = v
		case "tool_calls":
			toolCalls = v
		case "content":
			content = v
		case "tool_call_id":
			toolCallID = v
		}
		return true
	})
	if role.Type != gjson.String || !validRoles[role.Str] {
		return content, bad("messages[%d].role must be one of system, developer, user, assistant, tool.", i)
	}
	if n := name; n.Exists() && n.Type != gjson.String {
		return content, bad("messages[%d].name must be a string.", i)
	}
	hasToolCalls := false
	if toolCalls.Exists() && toolCalls.Type != gjson.Null {
		if role.Str != "assistant" || !toolCalls.IsArray() {
			return content, bad("messages[%d].tool_calls must be an array, on an assistant message.", i)
		}
		hasToolCalls = toolCalls.Get("#").Int() > 0
	}
	switch {
	case content.Type == gjson.String:
	case content.IsArray():
		ok := content.Get("#").Int() > 0
		content.ForEach(func(_, part gjson.Result) bool {
			ok = ok && part.IsObject() && part.Get("type").Type == gjson.String
			return ok
		})
		if !ok {
			return content, bad("messages[%d].content must be a string or a non-empty array of content parts.", i)
		}
	case (!content.Exists() || content.Type == gjson.Null) && hasToolCalls:
	case !content.Exists():
		return content, bad("messages[%d].content is required.", i)
	default:
		return content, bad("messages[%d].content must be a string.", i)
	}
	if role.Str == "tool" {
		if id := toolCallID; id.Type != gjson.String || id.Str == "" {
			return content, bad("messages[%d] has role tool and needs a tool_call_id.", i)
		}
	}
	tallyMessage(t, role, toolCalls, content)
	return content, nil
}

// countParts counts a message's parts for the hold (each an item of the
// prompt bound; image and file parts at the model's most, not as bytes), and
// refuses the parts whose cost the model's configuration cannot bound:
// audio (priced apart, unless the model allows it) and files (unless the
// model sets file_tokens).
func countParts(i int, content gjson.Result, m *config.Model, r *validChat) *oaierror.Error {
	var e *oaierror.Error
	j := 0
	content.ForEach(func(_, part gjson.Result) bool {
		param := fmt.Sprintf("messages[%d].content[%d]", i, j)
		j++
		r.tally.items++
		switch part.Get("type").Str {
		case "image_url":
			r.Images++
			r.tally.media += int64(len(part.Raw))
		case "file":
			if m.FileTokens <= 0 {
				err := oaierror.Invalid("unsupported_parameter", param, fmt.Sprintf(
					"The model %q takes no file parts: their cost cannot be known before the answer.", truncate(m.ID)))
				e = &err
			}
			r.Files++
			r.tally.media += int64(len(part.Raw))
		case "input_audio":
			if !m.Allows("audio") {
				err := oaierror.Invalid("unsupported_parameter", param, fmt.Sprintf(
					"The model %q is not priced for audio input; remove the audio or choose another model.", truncate(m.ID)))
				e = &err
			}
		}
		return e == nil
	})
	return e
}

// fields are the top-level values of a request body that validation reads.
type fields struct {
	model, messages, stream, streamOptions               gjson.Result
	temperature, topP, frequencyPenalty, presencePenalty gjson.Result
	maxTokens, maxCompletionTokens, stop, n              gjson.Result
	tools, functions, responseFormat                     gjson.Result
	unpriced                                             [len(unpricedNames)]gjson.Result
}

// set keeps the value of a known key, and reports false when the key was
// given already.
func (f *fields) set(key string, v gjson.Result) bool {
	p := f.slot(key)
	if p == nil {
		return true
	}
	if p.Exists() {
		return false
	}
	*p = v
	return true
}

// slot is where a known key's value goes; nil for keys validation ignores.
func (f *fields) slot(key string) *gjson.Result {
	switch key {
	case "model":
		return &f.model
	case "messages":
		return &f.messages
	case "stream":
		return &f.stream
	case "stream_options":
		return &f.streamOptions
	case "temperature":
		return &f.temperature
	case "top_p":
		return &f.topP
	case "frequency_penalty":
		return &f.frequencyPenalty
	case "presence_penalty":
		return &f.presencePenalty
	case "max_tokens":
		return &f.maxTokens
	case "max_completion_tokens":
		return &f.maxCompletionTokens
	case "stop":
		return &f.stop
	case "n":
		return &f.n
	case "tools":
		return &f.tools
	case "functions":
		return &f.functions
	case "response_format":
		return &f.responseFormat
	}
	for i, name := range unpricedNames {
		if key == name {
			return &f.unpriced[i]
		}
	}
	return nil
}

// truncate shortens a client's value quoted back to it.
func truncate(s string) string { return oaierror.Clip(s, 100) }
