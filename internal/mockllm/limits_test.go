package mockllm

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// limited is a format's request with an output limit, and where its answer
// says how it ended and what it counted.
var limited = []struct {
	name, path, stream string
	// body is a request for user's message with limit (0: none) and, when
	// schema is not empty, one tool "fill" with that parameters schema.
	body func(user string, limit int, schema string) string
	// finish is the whole answer's finish reason (a gjson path) and the
	// word of an answer cut at its limit; streamed says so in the stream.
	finish, cutWord, streamed string
	// text is the whole answer's text (a gjson path); usage are the
	// paths, in an answer or any stream event, of its completion tokens.
	text  string
	usage []string
}{
	{"openai chat", "/v1/chat/completions", "/v1/chat/completions",
		func(user string, limit int, schema string) string {
			return `{"model":"m","stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + quote(user) + `}]` +
				field("max_completion_tokens", limit) + tools(schema, `{"type":"function","function":{"name":"fill","parameters":%s}}`) + `}`
		}, "choices.0.finish_reason", "length", `"finish_reason":"length"`,
		"choices.0.message.content", []string{"usage.completion_tokens"}},
	{"openai responses", "/v1/responses", "/v1/responses",
		func(user string, limit int, schema string) string {
			return `{"model":"m","input":` + quote(user) + field("max_output_tokens", limit) +
				tools(schema, `{"type":"function","name":"fill","parameters":%s}`) + `}`
		}, "status", "incomplete", "event: response.incomplete",
		"output.0.content.0.text", []string{"usage.output_tokens", "response.usage.output_tokens"}},
	{"azure", "/openai/deployments/d/chat/completions?api-version=1", "/openai/deployments/d/chat/completions?api-version=1",
		func(user string, limit int, schema string) string {
			return `{"stream_options":{"include_usage":true},"messages":[{"role":"user","content":` + quote(user) + `}]` +
				field("max_tokens", limit) + tools(schema, `{"type":"function","function":{"name":"fill","parameters":%s}}`) + `}`
		}, "choices.0.finish_reason", "length", `"finish_reason":"length"`,
		"choices.0.message.content", []string{"usage.completion_tokens"}},
	{"anthropic", "/v1/messages", "/v1/messages",
		func(user string, limit int, schema string) string {
			return `{"model":"m","messages":[{"role":"user","content":` + quote(user) + `}]` + field("max_tokens", limit) +
				tools(schema, `{"name":"fill","input_schema":%s}`) + `}`
		}, "stop_reason", "max_tokens", `"stop_reason":"max_tokens"`,
		"content.0.text", []string{"usage.output_tokens", "message.usage.output_tokens"}},
	{"gemini", "/v1beta/models/g:generateContent", "/v1beta/models/g:streamGenerateContent?alt=sse",
		func(user string, limit int, schema string) string {
			gc := `"generationConfig":{}`
			if limit > 0 {
				gc = fmt.Sprintf(`"generationConfig":{"maxOutputTokens":%d}`, limit)
			}
			return `{"contents":[{"role":"user","parts":[{"text":` + quote(user) + `}]}],` + gc +
				tools(schema, `{"functionDeclarations":[{"name":"fill","parameters":%s}]}`) + `}`
		}, "candidates.0.finishReason", "MAX_TOKENS", `"finishReason":"MAX_TOKENS"`,
		"candidates.0.content.parts|@reverse|0.text", []string{"usageMetadata.candidatesTokenCount", "usageMetadata.thoughtsTokenCount"}},
}

func quote(s string) string { return string(mustJSON(s)) }

func field(name string, limit int) string {
	if limit == 0 {
		return ""
	}
	return fmt.Sprintf(`,%q:%d`, name, limit)
}

func tools(schema, tool string) string {
	if schema == "" {
		return ""
	}
	return `,"tools":[` + fmt.Sprintf(tool, schema) + `]`
}

// streamed makes a request body a stream's (Gemini's streams by path).
func streamed(body string) string { return strings.Replace(body, "{", `{"stream":true,`, 1) }

// completions are the completion tokens an answer or its stream reports,
// per event (Gemini's two counts added).
func completions(body string, paths []string) []int64 {
	var out []int64
	count := func(doc string) {
		n, seen := int64(0), false
		for _, p := range paths {
			if v := gjson.Get(doc, p); v.Exists() {
				n, seen = n+v.Int(), true
			}
		}
		if seen {
			out = append(out, n)
		}
	}
	if !strings.Contains(body, "data: ") {
		count(body)
		return out
	}
	for _, line := range strings.Split(body, "\n") {
		if doc, ok := strings.CutPrefix(strings.TrimSuffix(line, "\r"), "data: "); ok {
			count(doc)
		}
	}
	return out
}

// manyStrings is a parameters schema of n string properties.
func manyStrings(n int) string {
	props := make([]string, n)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%03d":{"type":"string"}`, i)
	}
	return `{"type":"object","properties":{` + strings.Join(props, ",") + `}}`
}

func TestTheOutputLimitCutsTheAnswerAndItsUsageInEveryFormat(t *testing.T) {
	h := []string{"Anthropic-Version", "2023-06-01"}
	for _, f := range limited {
		for _, c := range []struct {
			name, schema string
			limit        int
		}{
			{"text", "", 3},
			{"text, one token", "", 1},
			{"tool call", `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`, 3},
			{"a hundred properties, one token", manyStrings(100), 1},
		} {
			t.Run(f.name+"/"+c.name, func(t *testing.T) {
				m := New(Options{})
				body := f.body("Weather in Paris for the next days, please?", c.limit, c.schema)
				resp, whole := post(t, m, f.path, body, h...)
				require.Equal(t, http.StatusOK, resp.StatusCode, whole)
				assert.Equal(t, f.cutWord, gjson.Get(whole, f.finish).String(), whole)
				used := completions(whole, f.usage)
				require.Len(t, used, 1, whole)
				assert.True(t, used[0] >= 1 && used[0] <= int64(c.limit), "usage %d within the limit %d: %s", used[0], c.limit, whole)
				if c.schema == "" {
					text := gjson.Get(whole, f.text).String()
					assert.LessOrEqual(t, utf8.RuneCountInString(text), 4*c.limit, "the text is cut: %q", text)
					assert.True(t, strings.HasPrefix("You said: ", text) || strings.HasPrefix(text, "You said: "), "%q", text)
				}

				resp, stream := post(t, m, f.stream, streamed(body), h...)
				require.Equal(t, http.StatusOK, resp.StatusCode, stream)
				assert.Contains(t, stream, f.streamed, "the stream ends cut")
				used = completions(stream, f.usage)
				require.NotEmpty(t, used, stream)
				for _, n := range used {
					assert.LessOrEqual(t, n, int64(c.limit), "every usage the stream reports: %s", stream)
				}
			})
		}
	}
}

func TestAnAnswerWithinItsLimitIsWholeAndCountedAsBefore(t *testing.T) {
	m := New(Options{})
	body := `{"model":"m","max_completion_tokens":128,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	_, whole := post(t, m, "/v1/chat/completions", body)
	assert.Equal(t, "stop", gjson.Get(whole, "choices.0.finish_reason").String())
	assert.Equal(t, `You said: "Weather in Paris?". This is Tollgate's demo model: it answers offline, the same way every time.`,
		gjson.Get(whole, "choices.0.message.content").String())
	assert.EqualValues(t, 27, gjson.Get(whole, "usage.completion_tokens").Int(), "105 characters, four a token")
}

func TestAHugeToolRequestGetsABoundedAnswerInEveryFormat(t *testing.T) {
	h := []string{"Anthropic-Version", "2023-06-01"}
	user := "Tell me about W" + strings.Repeat("x", 9999) + " today."
	for _, f := range limited {
		for _, limit := range []int{0, 1 << 20} {
			t.Run(fmt.Sprintf("%s/limit %d", f.name, limit), func(t *testing.T) {
				m := New(Options{})
				body := f.body(user, limit, manyStrings(100))
				resp, whole := post(t, m, f.path, body, h...)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Less(t, len(whole), 64<<10, "the answer's bytes are bounded")
				assert.Equal(t, f.cutWord, gjson.Get(whole, f.finish).String(), "cut at the mock's own bound")
				assert.LessOrEqual(t, completions(whole, f.usage)[0], int64(maxAnswerRunes/4))

				resp, stream := post(t, m, f.stream, streamed(body), h...)
				require.Equal(t, http.StatusOK, resp.StatusCode)
				assert.Less(t, len(stream), 128<<10, "the stream's bytes are bounded")
				assert.Contains(t, stream, f.streamed)
			})
		}
	}
}

func TestAToolArgumentHoldsAtMostAFewHundredBytesOfTheSubject(t *testing.T) {
	m := New(Options{})
	word := "W" + strings.Repeat("é", 5000)
	body := `{"model":"m","messages":[{"role":"user","content":"Tell me about ` + word + `."}],` +
		`"tools":[{"type":"function","function":{"name":"fill","parameters":{"type":"object","properties":{"a":{"type":"string"},` +
		`"b":{"type":"string","enum":["` + strings.Repeat("z", 1000) + `"]},"c":{"type":"integer"}}}}}]}`
	_, whole := post(t, m, "/v1/chat/completions", body)
	args := gjson.Get(whole, "choices.0.message.tool_calls.0.function.arguments").String()
	require.True(t, gjson.Valid(args), "whole arguments: %s", args)
	a := gjson.Get(args, "a").String()
	assert.True(t, strings.HasPrefix(word, a) && len(a) <= maxValueBytes && len(a) > maxValueBytes-2, "cut between runes: %d bytes", len(a))
	assert.True(t, utf8.ValidString(a))
	assert.Len(t, gjson.Get(args, "b").String(), maxValueBytes)
	assert.EqualValues(t, 21, gjson.Get(args, "c").Int())
	assert.Equal(t, "tool_calls", gjson.Get(whole, "choices.0.finish_reason").String(), "within the bounds: not cut")
}

func TestAnAnswerCallsAtMostMaxCallsTools(t *testing.T) {
	m := New(Options{})
	var ts []string
	for i := range 100 {
		ts = append(ts, fmt.Sprintf(`{"type":"function","function":{"name":"t%d","parameters":{}}}`, i))
	}
	_, whole := post(t, m, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[`+strings.Join(ts, ",")+`]}`)
	assert.EqualValues(t, maxCalls, gjson.Get(whole, "choices.0.message.tool_calls.#").Int())
	assert.Equal(t, "length", gjson.Get(whole, "choices.0.finish_reason").String())
}

func TestAFixedUsageIsReportedPastTheLimit(t *testing.T) {
	m := New(Options{Answer: []string{"Hello", " from", " the", " mock", "."}, Usage: &Usage{Prompt: 9, Completion: 5}})
	_, whole := post(t, m, "/v1/chat/completions", `{"model":"m","max_tokens":1,"messages":[]}`)
	assert.Equal(t, "Hello from the mock.", gjson.Get(whole, "choices.0.message.content").String())
	assert.EqualValues(t, 5, gjson.Get(whole, "usage.completion_tokens").Int(), "a provider that bills past the limit")
}
