package extproc

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

const testConfig = `
providers:
  - {name: openai, type: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - id: gpt-4o-mini
    max_tokens: 100
    deployments: [{provider: openai, model: gpt-4o-mini}]
plans:
  - {name: pro, models: ["*"]}
`

func testCfg(t testing.TB) *config.Config {
	c, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	return c
}

func TestValidBodiesPass(t *testing.T) {
	cfg := testCfg(t)
	tests := []struct {
		name        string
		body        string
		stream      bool
		clientUsage bool
	}{
		{"minimal", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`, false, false},
		{"every field at its limits", `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"s"},{"role":"user","content":"u","name":"bob"}],
			"temperature":2,"top_p":0,"frequency_penalty":-2,"presence_penalty":2,"max_tokens":100,"stop":["a","b","c","d"]}`, false, false},
		{"nulls are absent", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":null,"stop":null,"max_tokens":null}`, false, false},
		{"stream with usage", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`, true, true},
		{"content parts", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`, false, false},
		{"developer role", `{"model":"gpt-4o-mini","messages":[{"role":"developer","content":"be terse"},{"role":"user","content":"hi"}]}`, false, false},
		{"tool round trip", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}]}`, false, false},
		{"reasoning content on a tool-call turn (DeepSeek's)", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},
			{"role":"assistant","content":"","reasoning_content":"I should call f.","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"42"}]}`, false, false},
		{"stop as a string", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"stop":"\n"}`, false, false},
		{"max_completion_tokens", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_completion_tokens":5}`, false, false},
		{"n", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"n":128}`, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := validate([]byte(tt.body), cfg)
			require.Nil(t, err)
			assert.Equal(t, "gpt-4o-mini", r.Model.ID)
			assert.Equal(t, tt.stream, r.Stream)
			assert.Equal(t, tt.clientUsage, r.ClientUsage)
			assert.Equal(t, max(gjson.Get(tt.body, "n").Int(), 1), r.Choices, "n choices, 1 when absent")
		})
	}
}

func TestInvalidBodiesGetTheirNamedError(t *testing.T) {
	cfg := testCfg(t)
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, body, code, param string
	}{
		{"malformed JSON", `{"model":`, "invalid_request", ""},
		{"not an object", `[1,2]`, "invalid_request", ""},
		{"missing model", `{` + msgs + `}`, "invalid_model", "model"},
		{"model not a string", `{"model":5,` + msgs + `}`, "invalid_model", "model"},
		{"unknown model", `{"model":"gpt-9",` + msgs + `}`, "invalid_model", "model"},
		{"missing messages", `{"model":"gpt-4o-mini"}`, "invalid_messages", "messages"},
		{"messages not an array", `{"model":"gpt-4o-mini","messages":{}}`, "invalid_messages", "messages"},
		{"empty messages", `{"model":"gpt-4o-mini","messages":[]}`, "invalid_messages", "messages"},
		{"message not an object", `{"model":"gpt-4o-mini","messages":["hi"]}`, "invalid_messages", "messages"},
		{"unknown role", `{"model":"gpt-4o-mini","messages":[{"role":"wizard","content":"hi"}]}`, "invalid_messages", "messages"},
		{"missing role", `{"model":"gpt-4o-mini","messages":[{"content":"hi"}]}`, "invalid_messages", "messages"},
		{"missing content", `{"model":"gpt-4o-mini","messages":[{"role":"user"}]}`, "invalid_messages", "messages"},
		{"content of the wrong type", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":42}]}`, "invalid_messages", "messages"},
		{"null content without tool calls", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":null}]}`, "invalid_messages", "messages"},
		{"tool without tool_call_id", `{"model":"gpt-4o-mini","messages":[{"role":"tool","content":"42"}]}`, "invalid_messages", "messages"},
		{"tool_calls on a user", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x","tool_calls":[]}]}`, "invalid_messages", "messages"},
		{"temperature too high", `{"model":"gpt-4o-mini",` + msgs + `,"temperature":2.01}`, "invalid_temperature", "temperature"},
		{"temperature negative", `{"model":"gpt-4o-mini",` + msgs + `,"temperature":-0.1}`, "invalid_temperature", "temperature"},
		{"temperature a string", `{"model":"gpt-4o-mini",` + msgs + `,"temperature":"1"}`, "invalid_temperature", "temperature"},
		{"max_tokens above the model's", `{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":101}`, "invalid_max_tokens", "max_tokens"},
		{"max_tokens zero", `{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":0}`, "invalid_max_tokens", "max_tokens"},
		{"max_tokens fractional", `{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":1.5}`, "invalid_max_tokens", "max_tokens"},
		{"max_completion_tokens too large", `{"model":"gpt-4o-mini",` + msgs + `,"max_completion_tokens":1000}`, "invalid_max_tokens", "max_completion_tokens"},
		{"five stops", `{"model":"gpt-4o-mini",` + msgs + `,"stop":["a","b","c","d","e"]}`, "invalid_stop", "stop"},
		{"stop not strings", `{"model":"gpt-4o-mini",` + msgs + `,"stop":[1]}`, "invalid_stop", "stop"},
		{"stop a number", `{"model":"gpt-4o-mini",` + msgs + `,"stop":1}`, "invalid_stop", "stop"},
		{"top_p above 1", `{"model":"gpt-4o-mini",` + msgs + `,"top_p":1.5}`, "invalid_request", "top_p"},
		{"frequency_penalty below -2", `{"model":"gpt-4o-mini",` + msgs + `,"frequency_penalty":-3}`, "invalid_request", "frequency_penalty"},
		{"presence_penalty above 2", `{"model":"gpt-4o-mini",` + msgs + `,"presence_penalty":2.5}`, "invalid_request", "presence_penalty"},
		{"stream not a boolean", `{"model":"gpt-4o-mini",` + msgs + `,"stream":"yes"}`, "invalid_request", "stream"},
		{"stream_options without stream", `{"model":"gpt-4o-mini",` + msgs + `,"stream_options":{"include_usage":true}}`, "invalid_request", "stream_options"},
		{"n zero", `{"model":"gpt-4o-mini",` + msgs + `,"n":0}`, "invalid_request", "n"},
		{"n above 128", `{"model":"gpt-4o-mini",` + msgs + `,"n":129}`, "invalid_request", "n"},
		{"n fractional", `{"model":"gpt-4o-mini",` + msgs + `,"n":1.5}`, "invalid_request", "n"},
		{"n a string", `{"model":"gpt-4o-mini",` + msgs + `,"n":"2"}`, "invalid_request", "n"},
		{"a field given twice", `{"model":"gpt-4o-mini",` + msgs + `,"max_tokens":10,"max_tokens":999999}`, "invalid_request", "max_tokens"},
		{"the model given twice", `{"model":"gpt-4o-mini","model":"gpt-4o",` + msgs + `}`, "invalid_request", "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := validate([]byte(tt.body), cfg)
			require.NotNil(t, err)
			assert.Equal(t, 400, err.Status)
			assert.Equal(t, tt.code, err.Code)
			assert.Equal(t, tt.param, err.Param)
			assert.Equal(t, "invalid_request_error", err.Type)
			assert.NotEmpty(t, err.Message)
		})
	}
}

func TestAnUnknownModelIsNotEchoedAtLength(t *testing.T) {
	_, err := validate([]byte(`{"model":"`+strings.Repeat("x", 10000)+`","messages":[]}`), testCfg(t))
	require.NotNil(t, err)
	assert.Less(t, len(err.Message), 300)
}

// FuzzValidate: no body makes the validator panic, and everything it
// rejects is a 400 with a code.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"tool","content":"x"}],"stop":["a"]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"assistant","content":null,"tool_calls":[{}]}],"temperature":1e400}`,
		`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":1},"messages":[]}`,
		`[`, `{"model":"\u0000"}`, ``,
		`{"model":"embed","input":["a",[1,2]],"dimensions":3}`,
		`{"model":"instruct","prompt":[[1],[2]],"n":2,"best_of":3,"stream":true}`,
		`{"input":[{"type":"image_url","image_url":{"url":"x"}}]}`,
		`{"model":"rerank-units","query":"q","documents":[{"text":"d"}],"top_n":1}`,
	} {
		f.Add([]byte(seed))
	}
	cfg, kinds := testCfg(f), kindsCfg(f)
	checks := []endpointCheck{checkEmbeddings, checkCompletions, checkModerations, checkRerank}
	f.Fuzz(func(t *testing.T, body []byte) {
		// Every endpoint's check too, with a model of every kind: a coded
		// 400, or a model and bounds that are not negative.
		for _, check := range checks {
			r, err := check(body, kinds)
			switch {
			case err != nil && (err.Status != 400 || err.Code == ""):
				t.Fatalf("rejection is not a coded 400: %+v", err)
			case err == nil && (r.Model == nil || r.PromptBound < 0 || r.Units < 0 || r.MaxTokens < 0 || r.Choices < 1):
				t.Fatalf("accepted %q as %+v", body, r)
			}
		}
		r, err := validate(body, cfg)
		if err != nil {
			if err.Status != 400 || err.Code == "" {
				t.Fatalf("rejection is not a coded 400: %+v", err)
			}
			return
		}
		if r.Model == nil {
			t.Fatalf("accepted without a model: %q", body)
		}
	})
}

func BenchmarkValidate(b *testing.B) {
	cfg := testCfg(b)
	for _, size := range []int{1 << 10, 1 << 20} {
		msg := strings.Repeat("lorem ipsum ", size/12)
		body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"` + msg + `"}],"temperature":0.7,"max_tokens":50,"stream":true,"stream_options":{"include_usage":true},"stop":["\n\n"]}`)
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := validate(body, cfg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// nested is a body whose field (content or metadata) holds n nested arrays.
func nested(field string, n int) []byte {
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":`)
	if field == "content" {
		b.WriteString(strings.Repeat("[", n) + strings.Repeat("]", n))
	} else {
		b.WriteString(`"hi"`)
	}
	b.WriteString(`}]`)
	if field == "metadata" {
		b.WriteString(`,"metadata":{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}`)
	}
	b.WriteString(`}`)
	return []byte(b.String())
}

func TestDeepNestingIsRefusedBeforeAnyRecursiveWalk(t *testing.T) {
	cfg := testCfg(t)
	for _, field := range []string{"content", "metadata"} {
		for _, n := range []int{MaxJSONDepth, 2 << 20} { // 4 MiB of brackets at the larger size
			t.Run(fmt.Sprintf("%s/%d", field, n), func(t *testing.T) {
				_, err := validate(nested(field, n), cfg)
				require.NotNil(t, err)
				assert.Equal(t, 400, err.Status)
				assert.Contains(t, err.Message, "deeper than 64 levels")
			})
		}
	}
	// Brackets inside strings are text, not nesting.
	text := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + strings.Repeat(`[{\"`, 1000) + `"}]}`
	_, err := validate([]byte(text), cfg)
	assert.Nil(t, err)
	// At the limit the body passes the nesting check (the content is then
	// checked as usual).
	assert.False(t, tooDeep(nested("metadata", MaxJSONDepth-3), MaxJSONDepth))
}

func TestValidatingABodyCostsMemoryInProportionToItsSize(t *testing.T) {
	cfg := testCfg(t)
	for _, body := range [][]byte{
		nested("content", 2<<20),
		[]byte(`{"model":"gpt-4o-mini","messages":[` + strings.Repeat(`{"role":"user","content":"hello there"},`, 100000) + `{"role":"user","content":"x"}]}`),
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		validate(body, cfg)
		runtime.ReadMemStats(&after)
		allocated := after.TotalAlloc - before.TotalAlloc
		assert.LessOrEqual(t, allocated, uint64(2*len(body)), "validating %d bytes allocated %d", len(body), allocated)
	}
}

// TestUnpricedParametersAreRefusedUnlessTheModelAllowsThem: a parameter
// whose price the model's per-token prices do not cover is refused by name
// (400 unsupported_parameter), unless it has its neutral value or the
// model (or every provider of it) allows it.
func TestUnpricedParametersAreRefusedUnlessTheModelAllowsThem(t *testing.T) {
	cfg, err := config.Parse([]byte(`
providers:
  - {name: openai, type: openai, base_url: "http://127.0.0.1:1/v1"}
  - {name: storing, type: openai, base_url: "http://127.0.0.1:2/v1", allow_parameters: [store]}
models:
  - {id: plain, max_tokens: 100, deployments: [{provider: openai, model: m}]}
  - {id: open, max_tokens: 100, allow_parameters: [service_tier, audio, prediction, web_search_options, moderation],
     deployments: [{provider: openai, model: m}]}
  - {id: stored, max_tokens: 100, deployments: [{provider: storing, model: m}]}
plans:
  - {name: pro, models: ["*"]}
`), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	msgs := `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		param, value string
		refused      bool // on the plain model
		allowedBy    string
	}{
		{"service_tier", `"priority"`, true, "open"},
		{"service_tier", `"flex"`, true, "open"},
		{"service_tier", `"auto"`, false, ""},
		{"service_tier", `"default"`, false, ""},
		{"modalities", `["text","audio"]`, true, "open"},
		{"modalities", `["text"]`, false, ""},
		{"audio", `{"voice":"alloy","format":"wav"}`, true, "open"},
		{"store", `true`, true, "stored"},
		{"store", `false`, false, ""},
		{"prediction", `{"type":"content","content":"x"}`, true, "open"},
		{"web_search_options", `{}`, true, "open"},
		{"moderation", `{"model":"omni-moderation-latest"}`, true, "open"},
		{"service_tier", `null`, false, ""},
	} {
		body := func(model string) []byte {
			return []byte(`{"model":"` + model + `",` + msgs + `,"` + tc.param + `":` + tc.value + `}`)
		}
		_, e := validate(body("plain"), cfg)
		if !tc.refused {
			assert.Nil(t, e, "%s: %s passes", tc.param, tc.value)
			continue
		}
		if assert.NotNil(t, e, "%s: %s is refused", tc.param, tc.value) {
			assert.Equal(t, 400, e.Status)
			assert.Equal(t, "unsupported_parameter", e.Code)
			assert.Equal(t, tc.param, e.Param)
		}
		_, e = validate(body(tc.allowedBy), cfg)
		assert.Nil(t, e, "%s: %s is allowed on %s", tc.param, tc.value, tc.allowedBy)
	}
	// store is the storing provider's to allow, not every model's.
	_, e := validate([]byte(`{"model":"open",`+msgs+`,"store":true}`), cfg)
	require.NotNil(t, e)
	// A second copy cannot slip a value past the check.
	_, e = validate([]byte(`{"model":"plain",`+msgs+`,"store":false,"store":true}`), cfg)
	require.NotNil(t, e)
}

// TestInputsTheBodySizeDoesNotShowAreCountedOrRefused: images and files
// are counted for the hold; audio input and files are refused on a model
// not priced for them.
func TestInputsTheBodySizeDoesNotShowAreCountedOrRefused(t *testing.T) {
	cfg, err := config.Parse([]byte(`
providers:
  - {name: openai, type: openai, base_url: "http://127.0.0.1:1/v1"}
models:
  - {id: plain, max_tokens: 100, deployments: [{provider: openai, model: m}]}
  - {id: rich, max_tokens: 100, file_tokens: 50000, allow_parameters: [audio], deployments: [{provider: openai, model: m}]}
plans:
  - {name: pro, models: ["*"]}
`), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	img := `{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`
	file := `{"type":"file","file":{"file_id":"file-1"}}`
	audio := `{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`
	body := func(model string, parts ...string) []byte {
		return []byte(`{"model":"` + model + `","messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]},` +
			`{"role":"user","content":[` + img + `]}],"tools":[{"type":"function","function":{"name":"f"}}]}`)
	}
	r, e := validate(body("plain", img, img), cfg)
	require.Nil(t, e)
	assert.EqualValues(t, 3, r.Images)
	assert.True(t, r.tally.tools)
	assert.Equal(t, 3779, r.Model.ImageTokens, "OpenAI's default")

	_, e = validate(body("plain", file), cfg)
	require.NotNil(t, e)
	assert.Equal(t, "messages[0].content[0]", e.Param)
	_, e = validate(body("plain", img, audio), cfg)
	require.NotNil(t, e)
	assert.Equal(t, "messages[0].content[1]", e.Param)

	r, e = validate(body("rich", file, audio, file), cfg)
	require.Nil(t, e)
	assert.EqualValues(t, 2, r.Files)
}

// TestTheHoldCountsWhatTheBodySizeDoesNotShow: twenty images in a small
// body are held at the model's most per image, not as bytes.
func TestTheHoldCountsWhatTheBodySizeDoesNotShow(t *testing.T) {
	cfg := testCfg(t)
	parts := strings.TrimSuffix(strings.Repeat(`{"type":"image_url","image_url":{"url":"https://e.co/i.png"}},`, 20), ",")
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":[` + parts + `]}]}`)
	r, e := validate(body, cfg)
	require.Nil(t, e)
	assert.GreaterOrEqual(t, promptTokensHeld(r), int64(20*3779))
	assert.Less(t, int64(len(body)), int64(20*3779), "the body alone would hold far less")
}

// TestTheHeldLimitIsTheBodysOnlyLimit: the body the providers get carries
// the held output limit, and only it; a body that already does is left as
// it is.
func TestTheHeldLimitIsTheBodysOnlyLimit(t *testing.T) {
	cfg := testCfg(t)
	s := &Server{opt: Options{Logger: slog.New(slog.DiscardHandler)}}
	r := &routerStep{s: s}
	for body, want := range map[string]string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`:                                            `100`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":90,"max_completion_tokens":30}`: `30`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"max_tokens":40}`:                            `40`,
	} {
		cr, e := validate([]byte(body), cfg)
		require.Nil(t, e)
		out, e := r.limitBody(t.Context(), []byte(body), cr)
		require.Nil(t, e)
		limits := gjson.GetManyBytes(out, "max_tokens", "max_completion_tokens")
		assert.True(t, limits[0].Exists() != limits[1].Exists(), "one limit: %s", out)
		assert.Equal(t, cr.MaxTokens, limits[0].Int()+limits[1].Int())
		assert.Equal(t, want, fmt.Sprint(cr.MaxTokens))
		if cr.LimitSent {
			assert.Equal(t, body, string(out), "left as it is")
		}
	}
}

// depthByteByByte is tooDeep's meaning, one byte at a time: the reference
// the skipping scan must agree with.
func depthByteByByte(body []byte, limit int) bool {
	depth := 0
	inString, escaped := false, false
	for _, c := range body {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
			if depth > limit {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// TestTheNestingCheckSkipsStringsAsAByteByByteReadDoes: on bodies made of
// quotes, backslash runs, brackets and text — escaped quotes, strings
// ending in backslashes, unterminated strings —, the check that skips a
// string to its closing quote agrees with one that reads every byte.
func TestTheNestingCheckSkipsStringsAsAByteByByteReadDoes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pieces := []string{`"`, `\\`, `\"`, `[`, `]`, `{`, `}`, `a`, `\\\\`, `:`, `,`}
	for range 20000 {
		var b strings.Builder
		for range rng.IntN(40) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		body := []byte(b.String())
		for _, limit := range []int{0, 1, 2, 3, 5} {
			require.Equal(t, depthByteByByte(body, limit), tooDeep(body, limit), "limit %d, body %q", limit, body)
		}
	}
	long := []byte(`{"messages":[{"content":"` + strings.Repeat(`a \\\" [{ `, 5000) + `"}], "x": [[[[1]]]]}`)
	assert.Equal(t, depthByteByByte(long, 4), tooDeep(long, 4))
	assert.True(t, tooDeep(long, 4), "the brackets after the long string count")
}
