package mockllm

import (
	"math"
	"strings"
	"unicode/utf8"
)

// read reads what a request asks, in its format.
func read(req *Request) asked {
	b := req.Body
	a := asked{text: textSize(b, "", utf8.RuneCountInString)}
	if req.billBytes {
		// Counted as characters at four a token (tokens), so four per
		// byte make one token a byte.
		a.text = 4 * textSize(b, "", func(s string) int { return len(s) })
	}
	a.model, _ = b["model"].(string)
	a.stream, _ = b["stream"].(bool)
	if req.Vertex {
		a.model = pathModel(req.Path)
	}
	switch {
	case req.Format == OpenAI && req.Path == "/v1/responses":
		readResponses(b, &a)
	case req.Format == Anthropic:
		readAnthropic(b, &a)
	case req.Format == Gemini:
		readGemini(req, &a)
	case req.Format == Bedrock:
		readBedrock(req, &a)
	default:
		readChat(b, &a)
	}
	return a
}

func list(v any) []map[string]any {
	vs, _ := v.([]any)
	out := make([]map[string]any, 0, len(vs))
	for _, e := range vs {
		if m, ok := e.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func object(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// partsText is the text of a content: a string, or the text of its parts.
func partsText(content any) string {
	if s, ok := content.(string); ok {
		return s
	}
	var b strings.Builder
	for _, p := range list(content) {
		if t, ok := p["text"].(string); ok {
			b.WriteString(t)
		}
	}
	return b.String()
}

func readChat(b map[string]any, a *asked) {
	a.includeUsage, _ = object(b["stream_options"])["include_usage"].(bool)
	msgs := list(b["messages"])
	for _, m := range msgs {
		if m["role"] == "user" {
			a.lastUser = partsText(m["content"])
		}
	}
	a.afterTool = len(msgs) > 0 && msgs[len(msgs)-1]["role"] == "tool"
	for _, t := range list(b["tools"]) {
		f := object(t["function"])
		name, _ := f["name"].(string)
		a.tools = append(a.tools, tool{name: name, schema: object(f["parameters"])})
	}
	a.choice = openAIChoice(b["tool_choice"], func(c map[string]any) any { return object(c["function"])["name"] })
}

// openAIChoice reads OpenAI's tool_choice; name reads a named choice's
// tool name.
func openAIChoice(v any, name func(map[string]any) any) toolChoice {
	switch v {
	case "none":
		return toolChoice{mode: "none"}
	case "required":
		return toolChoice{mode: "forced"}
	}
	if c := object(v); c != nil {
		n, _ := name(c).(string)
		return toolChoice{mode: "forced", name: n}
	}
	return toolChoice{mode: "auto"}
}

func readResponses(b map[string]any, a *asked) {
	if s, ok := b["input"].(string); ok {
		a.lastUser = s
	}
	items := list(b["input"])
	for _, it := range items {
		if it["role"] == "user" {
			a.lastUser = partsText(it["content"])
		}
	}
	a.afterTool = len(items) > 0 && items[len(items)-1]["type"] == "function_call_output"
	for _, t := range list(b["tools"]) {
		if t["type"] == "function" {
			name, _ := t["name"].(string)
			a.tools = append(a.tools, tool{name: name, schema: object(t["parameters"])})
		}
	}
	a.choice = openAIChoice(b["tool_choice"], func(c map[string]any) any { return c["name"] })
}

func readAnthropic(b map[string]any, a *asked) {
	readTurns(list(b["messages"]), a, func(block map[string]any) bool { return block["type"] == "tool_result" })
	for _, t := range list(b["tools"]) {
		name, _ := t["name"].(string)
		a.tools = append(a.tools, tool{name: name, schema: object(t["input_schema"])})
	}
	a.thinking = object(b["thinking"])["type"] == "enabled"
	c := object(b["tool_choice"])
	switch c["type"] {
	case "none":
		a.choice.mode = "none"
	case "any":
		a.choice.mode = "forced"
	case "tool":
		a.choice.mode = "forced"
		a.choice.name, _ = c["name"].(string)
	default:
		a.choice.mode = "auto"
	}
}

func readGemini(req *Request, a *asked) {
	b := req.Body
	a.model = pathModel(req.Path)
	a.stream = strings.HasSuffix(req.Path, ":streamGenerateContent")
	contents := list(b["contents"])
	for i, c := range contents {
		if c["role"] != "user" && c["role"] != nil {
			continue
		}
		if t := partsText(c["parts"]); t != "" {
			a.lastUser = t
		}
		for _, p := range list(c["parts"]) {
			if p["functionResponse"] != nil && i == len(contents)-1 {
				a.afterTool = true
			}
		}
	}
	for _, t := range list(b["tools"]) {
		for _, d := range list(t["functionDeclarations"]) {
			name, _ := d["name"].(string)
			schema := object(d["parametersJsonSchema"])
			if schema == nil {
				schema = object(d["parameters"])
			}
			a.tools = append(a.tools, tool{name: name, schema: schema})
		}
	}
	fc := object(object(b["toolConfig"])["functionCallingConfig"])
	switch fc["mode"] {
	case "NONE":
		a.choice.mode = "none"
	case "ANY":
		a.choice.mode = "forced"
		if n, ok := fc["allowedFunctionNames"].([]any); ok && len(n) == 1 {
			a.choice.name, _ = n[0].(string)
		}
	default:
		a.choice.mode = "auto"
	}
}

// intField reads an optional integer field of a body: def when it is
// absent or null, and false when it is not an integer within [lo, hi].
func intField(b map[string]any, key string, def, lo, hi int) (int, bool) {
	v, ok := b[key]
	if !ok || v == nil {
		return def, true
	}
	n, ok := integer(v)
	if !ok || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// integer is v as an int when it is a JSON number without a fraction that
// fits in 32 bits.
func integer(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || f < math.MinInt32 || f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

// tokenArray is v as a non-empty array of token ids (integers ≥ 0), or
// false.
func tokenArray(v any) ([]int, bool) {
	vs, ok := v.([]any)
	if !ok || len(vs) == 0 {
		return nil, false
	}
	out := make([]int, len(vs))
	for i, e := range vs {
		n, ok := integer(e)
		if !ok || n < 0 {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// tokensOf counts a text's tokens as the prompt's are counted (see
// tokens; one a byte with Options.BillBytes), without OpenAI's 3 for
// priming a chat's reply.
func (req *Request) tokensOf(s string) int {
	if req.billBytes {
		return len(s)
	}
	return tokens(utf8.RuneCountInString(s))
}

// modelOf is the model a request names: its body's model, else its
// path's (an Azure deployment, a Gemini model).
func modelOf(req *Request) string {
	if s, ok := req.Body["model"].(string); ok && req.Format != Gemini {
		return s
	}
	switch req.Format {
	case Azure:
		deployment, _, _ := strings.Cut(strings.TrimPrefix(req.Path, "/openai/deployments/"), "/")
		return deployment
	case Gemini:
		return pathModel(req.Path)
	}
	if req.Vertex {
		return pathModel(req.Path)
	}
	return ""
}

// readTurns reads the last user message's text of alternating user and
// assistant messages of content blocks (Anthropic's, Bedrock's), and
// whether the last message holds a tool's result (isResult).
func readTurns(msgs []map[string]any, a *asked, isResult func(block map[string]any) bool) {
	for i, m := range msgs {
		if m["role"] != "user" {
			continue
		}
		if t := partsText(m["content"]); t != "" {
			a.lastUser = t
		}
		for _, block := range list(m["content"]) {
			if isResult(block) && i == len(msgs)-1 {
				a.afterTool = true
			}
		}
	}
}
