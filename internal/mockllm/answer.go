package mockllm

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The bounds of every answer, whatever its request: a string argument's
// value is at most maxValueBytes, an answer calls at most maxCalls tools,
// and its text, tool names and arguments are at most maxAnswerRunes in all
// (maxAnswerRunes/4 tokens as the mock counts them; see tokens). An answer
// that reaches a bound ends as one that reaches its request's output limit.
const (
	maxValueBytes  = 256
	maxCalls       = 32
	maxAnswerRunes = 16 << 10
)

// asked is what the mock reads of a request, whatever its format.
type asked struct {
	model  string
	stream bool
	// includeUsage is OpenAI's stream_options.include_usage.
	includeUsage bool
	// lastUser is the text of the last user message.
	lastUser string
	// afterTool is true when the last message is a tool's result.
	afterTool bool
	tools     []tool
	choice    toolChoice
	// text is every piece of text the request carries, for counting.
	text int
	// limit is the request's output limit in tokens (see outputLimit), 0
	// when it sets none.
	limit int
	// thinking: an Anthropic request enables extended thinking.
	thinking bool
	// usageInLast puts a stream's usage on its last chunk, unasked, as
	// Mistral does (Options.Strict).
	usageInLast bool
}

type tool struct {
	name   string
	schema map[string]any
}

// toolChoice is the request's tool choice: mode is none, auto or forced;
// name, when forced, is the one tool to call ("" for any).
type toolChoice struct {
	mode, name string
}

// call is one tool call of an answer.
type call struct {
	name string
	// args are the arguments' JSON in the pieces a stream sends.
	args []string
}

func (c call) arguments() string { return strings.Join(c.args, "") }

// reply is the answer, before it takes a format's shape: text pieces or
// tool calls, and usage.
type reply struct {
	pieces []string
	calls  []call
	// forced is true when the request named the one tool to call.
	forced bool
	// cut is true when the answer stopped at its output limit (the
	// request's, or the mock's own bounds): its finish reason says so.
	cut   bool
	usage Usage
}

func (r reply) text() string { return strings.Join(r.pieces, "") }

// answer writes the reply to a request in its format.
func (m *Mock) answer(w http.ResponseWriter, r *http.Request, req *Request, f Fault) {
	p := f.Play
	a := read(req)
	a.limit = outputLimit(req)
	a.usageInLast = m.opt.Strict
	rep := m.reply(a)
	if !a.stream && p == Malformed {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,`))
		return
	}
	var whole any
	var s stream
	switch {
	case req.Format == OpenAI && req.Path == "/v1/responses":
		whole, s = responses(a, rep)
	case req.Format == Anthropic:
		whole, s = anthropic(a, rep)
	case req.Format == Gemini:
		whole, s = gemini(a, rep, geminiOptionsOf(req.Body))
	case req.Format == Bedrock:
		whole, s = bedrock(a, rep)
	default:
		whole, s = chat(a, rep, req.Format == Azure)
	}
	if !a.stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(whole))
		return
	}
	m.play(w, r, s, f)
}

// reply is the mock's answer to what was asked: Options.Answer, or the
// deterministic text; tool calls when the tool choice says so. The answer
// is cut at the request's output limit, as the mock counts tokens, and at
// the mock's own bounds (maxAnswerRunes, maxCalls); the counted usage
// never exceeds the limit. Options.Usage, when set, is reported as it is
// and only the mock's own bounds cut: a provider that bills past the limit.
func (m *Mock) reply(a asked) reply {
	var rep reply
	left := maxAnswerRunes
	if a.limit > 0 && m.opt.Usage == nil {
		left = min(left, 4*a.limit)
	}
	b := &budget{left: left}
	if tools := a.toCall(); len(tools) > 0 {
		rep.forced = a.choice.mode == "forced" && a.choice.name != ""
		for _, t := range tools {
			c, ok := b.call(t, a.lastUser)
			if !ok {
				break
			}
			rep.calls = append(rep.calls, c)
			if len(rep.calls) == maxCalls && len(tools) > maxCalls {
				b.cut = true
				break
			}
		}
	} else {
		text := m.opt.Answer
		if len(text) == 0 {
			text = pieces(demoText(a.lastUser))
		}
		rep.pieces = b.pieces(text)
	}
	rep.cut = b.cut
	if m.opt.Usage != nil {
		rep.usage = *m.opt.Usage
		return rep
	}
	rep.usage = Usage{Prompt: tokens(a.text) + 3, Completion: max(1, tokens(b.used))}
	return rep
}

// toCall are the tools the answer calls: those the tool choice forces
// (only the named one), else every offered one unless the last message is
// a tool's result; none when the answer is text.
func (a asked) toCall() []tool {
	switch {
	case len(a.tools) == 0 || a.choice.mode == "none":
		return nil
	case a.choice.mode == "forced":
		var out []tool
		for _, t := range a.tools {
			if a.choice.name == "" || t.name == a.choice.name {
				out = append(out, t)
			}
		}
		return out
	case !a.afterTool:
		return a.tools
	}
	return nil
}

// budget is what is left of an answer's runes as it is made.
type budget struct {
	left, used int
	// cut is true once something did not fit.
	cut bool
}

// take takes at most b.left runes of s.
func (b *budget) take(s string) string {
	n := utf8.RuneCountInString(s)
	if n > b.left {
		s, n, b.cut = cutRunes(s, b.left), b.left, true
	}
	b.left -= n
	b.used += n
	return s
}

// pieces are text's pieces as far as the budget goes.
func (b *budget) pieces(text []string) []string {
	var out []string
	for _, p := range text {
		if b.cut {
			break
		}
		if p = b.take(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// call is a call of t, its arguments cut where the budget ends, or false
// when not even its name and the arguments' first rune fit.
func (b *budget) call(t tool, user string) (call, bool) {
	if b.left <= utf8.RuneCountInString(t.name) {
		b.cut = true
		return call{}, false
	}
	name := b.take(t.name)
	args := b.take(arguments(t.schema, user, b.left))
	return call{name: name, args: splitArgs(args)}, true
}

// cutRunes is s's first n runes.
func cutRunes(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}

// cutBytes is s's longest prefix of at most n bytes that ends between
// runes.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// outputLimit is the request's limit on the answer's tokens, in its
// format's field (the smaller of OpenAI chat's two), or 0 when it sets
// none.
func outputLimit(req *Request) int {
	b := req.Body
	var fields []any
	switch {
	case req.Format == OpenAI && req.Path == "/v1/responses":
		fields = []any{b["max_output_tokens"]}
	case req.Format == Anthropic:
		fields = []any{b["max_tokens"]}
	case req.Format == Gemini:
		fields = []any{object(b["generationConfig"])["maxOutputTokens"]}
	case req.Format == Bedrock:
		fields = []any{object(b["inferenceConfig"])["maxTokens"]}
	default:
		fields = []any{b["max_completion_tokens"], b["max_tokens"]}
	}
	limit := 0
	for _, f := range fields {
		if n, ok := f.(float64); ok && n >= 1 {
			n = min(n, math.MaxInt32)
			if limit == 0 || int(n) < limit {
				limit = int(n)
			}
		}
	}
	return limit
}

// tokens estimates the tokens of n characters: about four each.
func tokens(n int) int { return (n + 3) / 4 }

// demoText is the deterministic answer to a user's message.
func demoText(user string) string {
	user = strings.Join(strings.Fields(user), " ")
	if user == "" {
		return "Hello from Tollgate's demo model. It answers offline; try a real provider next."
	}
	if r := []rune(user); len(r) > 60 {
		user = string(r[:57]) + "..."
	}
	return fmt.Sprintf("You said: %q. This is Tollgate's demo model: it answers offline, the same way every time.", user)
}

// pieces splits a text into stream pieces: words with their spaces.
func pieces(text string) []string {
	var out []string
	start := 0
	for i, r := range text {
		if r == ' ' && i > start {
			out = append(out, text[start:i])
			start = i
		}
	}
	return append(out, text[start:])
}

// splitArgs cuts arguments' JSON after its first colon, so that a stream
// sends them in two pieces.
func splitArgs(args string) []string {
	if i := strings.Index(args, ":"); i > 0 && i < len(args)-1 {
		return []string{args[:i+1], args[i+1:]}
	}
	return []string{args}
}

// arguments fills a tool's parameters schema: every property, strings
// with the enum's first value or the user's subject (see subject), cut at
// maxValueBytes, numbers 21, booleans true, arrays and objects empty. Keys
// come sorted. Once the JSON passes 4×runes bytes (more than runes runes),
// the properties left are not written: the caller cuts it.
func arguments(schema map[string]any, user string, runes int) string {
	props, _ := schema["properties"].(map[string]any)
	var b strings.Builder
	b.WriteByte('{')
	for i, name := range slices.Sorted(maps.Keys(props)) {
		if b.Len() > 4*runes {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		prop, _ := props[name].(map[string]any)
		b.Write(mustJSON(name))
		b.WriteByte(':')
		b.Write(mustJSON(value(prop, user)))
	}
	b.WriteByte('}')
	return b.String()
}

func value(prop map[string]any, user string) any {
	if enum, ok := prop["enum"].([]any); ok && len(enum) > 0 {
		if s, ok := enum[0].(string); ok {
			return cutBytes(s, maxValueBytes)
		}
		if len(mustJSON(enum[0])) <= maxValueBytes {
			return enum[0]
		}
	}
	switch prop["type"] {
	case "string":
		return cutBytes(subject(user), maxValueBytes)
	case "number", "integer":
		return 21
	case "boolean":
		return true
	case "array":
		return []any{}
	case "object":
		return map[string]any{}
	}
	return nil
}

// subject is the first word of the text after its first that begins with
// a capital letter and is not an acronym (its punctuation trimmed), or
// "demo": "Paris" in "Weather in Paris as JSON.".
func subject(text string) string {
	words := strings.Fields(text)
	for i := 1; i < len(words); i++ {
		w := strings.TrimFunc(words[i], func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
		if r, _ := utf8.DecodeRuneInString(w); unicode.IsUpper(r) && strings.ToUpper(w) != w {
			return w
		}
	}
	return "demo"
}

// textSize is the size (characters, or bytes with BillBytes) of every
// string of v under a key that holds text in one of the formats.
func textSize(v any, key string, size func(string) int) int {
	switch x := v.(type) {
	case string:
		switch key {
		case "content", "text", "input", "system", "instructions", "arguments", "output":
			return size(x)
		}
	case []any:
		n := 0
		for _, e := range x {
			n += textSize(e, key, size)
		}
		return n
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		n := 0
		for _, k := range keys {
			n += textSize(x[k], k, size)
		}
		return n
	}
	return 0
}
