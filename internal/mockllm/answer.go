package mockllm

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
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
	usage  Usage
}

func (r reply) text() string { return strings.Join(r.pieces, "") }

// answer writes the reply to a request in its format.
func (m *Mock) answer(w http.ResponseWriter, r *http.Request, req *Request, p Play) {
	a := read(req)
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
	default:
		whole, s = chat(a, rep, req.Format == Azure)
	}
	if !a.stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(mustJSON(whole))
		return
	}
	m.play(w, r, s, p)
}

// reply is the mock's answer to what was asked: Options.Answer, or the
// deterministic text; tool calls when the tool choice says so.
func (m *Mock) reply(a asked) reply {
	var rep reply
	switch {
	case len(a.tools) == 0 || a.choice.mode == "none":
	case a.choice.mode == "forced":
		for _, t := range a.tools {
			if a.choice.name == "" || t.name == a.choice.name {
				rep.calls = append(rep.calls, call{name: t.name, args: splitArgs(arguments(t.schema, a.lastUser))})
			}
		}
		rep.forced = a.choice.name != ""
	case !a.afterTool:
		for _, t := range a.tools {
			rep.calls = append(rep.calls, call{name: t.name, args: splitArgs(arguments(t.schema, a.lastUser))})
		}
	}
	if len(rep.calls) == 0 {
		rep.pieces = m.opt.Answer
		if len(rep.pieces) == 0 {
			rep.pieces = pieces(demoText(a.lastUser))
		}
	}
	if m.opt.Usage != nil {
		rep.usage = *m.opt.Usage
		return rep
	}
	out := rep.text()
	for _, c := range rep.calls {
		out += c.name + c.arguments()
	}
	rep.usage = Usage{Prompt: tokens(a.text) + 3, Completion: max(1, tokens(utf8.RuneCountInString(out)))}
	return rep
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
// with the enum's first value or the user's subject (see subject),
// numbers 21, booleans true, arrays and objects empty. Keys come sorted.
func arguments(schema map[string]any, user string) string {
	props, _ := schema["properties"].(map[string]any)
	out := make(map[string]any, len(props))
	for name, p := range props {
		prop, _ := p.(map[string]any)
		out[name] = value(prop, user)
	}
	return string(mustJSON(out))
}

func value(prop map[string]any, user string) any {
	if enum, ok := prop["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	switch prop["type"] {
	case "string":
		return subject(user)
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

// textSize is the characters of every string of v under a key that holds
// text in one of the formats.
func textSize(v any, key string) int {
	switch x := v.(type) {
	case string:
		switch key {
		case "content", "text", "input", "system", "instructions", "arguments", "output":
			return utf8.RuneCountInString(x)
		}
	case []any:
		n := 0
		for _, e := range x {
			n += textSize(e, key)
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
			n += textSize(x[k], k)
		}
		return n
	}
	return 0
}
