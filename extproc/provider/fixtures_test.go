package provider

import (
	"github.com/tollgate/tollgate/oaierror"

	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/extproc/sse"
)

// Recorded provider traffic lives in testdata/<provider>/, written from each
// provider's published API reference:
//   - request_*.json: client requests; request_*.golden.json is the
//     upstream request (path, authority, headers, body) they become;
//   - response_*.json: non-streamed answers; *.golden.json is the client's;
//   - stream_*.sse: streamed answers; *.golden.sse is the client's stream;
//   - error_<status>*.json: error bodies; *.golden.json is the client's.
//
// go test -run . -update rewrites the goldens and the fuzz seed corpus.

var update = flag.Bool("update", false, "rewrite golden files and the fuzz seed corpus")

// testEnv makes created and fallback ids fixed.
var testEnv = env{
	now:   func() time.Time { return time.Unix(1750000000, 0) },
	newID: func() string { return "chatcmpl-tollgate-test" },
}

func testAdapter(typ string) Adapter {
	switch typ {
	case config.TypeAnthropic:
		return anthropic{testEnv}
	case config.TypeGemini:
		return gemini{testEnv}
	case config.TypeAzure:
		return azure{}
	case config.TypeBedrock:
		return bedrock{env: testEnv, creds: &bedrockCredentials{load: noDefaultChain}}
	}
	return &openAI{}
}

// testTarget is the deployment each provider's fixtures were written for.
func testTarget(typ string) Target {
	model := &config.Model{ID: "public-model", MaxTokens: 8192}
	p := &config.Provider{Name: typ + "-main", Type: typ}
	d := &config.Deployment{Provider: p.Name}
	switch typ {
	case config.TypeOpenAI:
		p.BaseURL, p.APIKey, d.Model = "https://api.openai.com/v1", "sk-test-openai", "gpt-4o-mini"
	case config.TypeAzure:
		p.BaseURL, p.APIKey, p.APIVersion, d.Model = "https://contoso.openai.azure.com", "az-test-key", "2024-10-21", "gpt-4o prod"
	case config.TypeAnthropic:
		p.BaseURL, p.APIKey, p.APIVersion, d.Model = "https://api.anthropic.com", "sk-ant-test", "2023-06-01", "claude-sonnet-4-5"
	case config.TypeGemini:
		p.BaseURL, p.APIKey, d.Model = "https://generativelanguage.googleapis.com", "gem-test-key", "models/gemini-2.5-flash"
	case config.TypeBedrock:
		p.BaseURL, p.Region, d.Model = "https://bedrock-runtime.us-east-1.amazonaws.com", "us-east-1", "anthropic.claude-3-5-sonnet-20240620-v1:0"
		p.AccessKeyID, p.SecretAccessKey = testAccessKeyID, testSecretAccessKey
	}
	return Target{Model: model, Deployment: d, Provider: p}
}

// newTestResponse starts a Response for an answer to a minimal request,
// with the extra top-level fields given (`"n":2`…).
func newTestResponse(t testing.TB, typ string, stream, clientUsage bool, extra ...string) Response {
	t.Helper()
	body := fmt.Sprintf(`{"model":"public-model","messages":[{"role":"user","content":"hi"}],"stream":%t}`, stream)
	for _, e := range extra {
		body = strings.TrimSuffix(body, "}") + "," + e + "}"
	}
	_, resp, err := testAdapter(typ).Translate(&Request{Body: []byte(body), Stream: stream, ClientUsage: clientUsage}, testTarget(typ))
	require.NoError(t, err)
	return resp
}

// feed gives resp the provider's status and body in the given pieces, each
// in a fresh buffer that is scribbled over afterwards (as a gRPC stream
// reuses memory), and returns what the client gets and the status.
func feed(resp Response, status int, pieces ...[]byte) (int, []byte, error) {
	st := resp.Status(status)
	var out []byte
	for i, p := range pieces {
		b := append([]byte(nil), p...)
		got, err := resp.Body(b, i == len(pieces)-1)
		out = append(out, got...)
		for j := range b {
			b[j] = '#'
		}
		if err != nil {
			return st, out, err
		}
	}
	return st, out, nil
}

func readFixture(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", path))
	require.NoError(t, err)
	return b
}

// golden compares got with the golden file, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	path = filepath.Join("testdata", path)
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), string(got), "differs from %s", path)
}

func goldenName(fixture, ext string) string {
	return strings.TrimSuffix(fixture, filepath.Ext(fixture)) + ".golden" + ext
}

func indentJSON(t testing.TB, v any) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	require.NoError(t, enc.Encode(v))
	return b.Bytes()
}

// requestCase is a client request and what must be true of its upstream
// request beyond its golden.
type requestCase struct {
	fixture string
	check   func(t *testing.T, up Upstream)
}

// testRequests translates each client request and compares the upstream
// request with its golden.
func testRequests(t *testing.T, typ string, cases []requestCase) {
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, filepath.Join(typ, tc.fixture))
			orig := append([]byte(nil), body...)
			var flags struct {
				Stream        bool `json:"stream"`
				StreamOptions struct {
					IncludeUsage bool `json:"include_usage"`
				} `json:"stream_options"`
			}
			require.NoError(t, json.Unmarshal(body, &flags))
			req := &Request{Body: body, Stream: flags.Stream, ClientUsage: flags.StreamOptions.IncludeUsage}
			up, resp, err := testAdapter(typ).Translate(req, testTarget(typ))
			require.NoError(t, err)
			require.NotNil(t, resp)
			assert.Equal(t, orig, body, "the client's body was modified in place")
			require.True(t, json.Valid(up.Body), "upstream body is not JSON: %s", up.Body)
			golden(t, filepath.Join(typ, goldenName(tc.fixture, ".json")), indentJSON(t, struct {
				Path      string          `json:"path"`
				Authority string          `json:"authority"`
				Headers   []Header        `json:"headers"`
				Body      json.RawMessage `json:"body"`
			}{up.Path, up.Authority, up.Headers, up.Body}))
			if tc.check != nil {
				tc.check(t, up)
			}
		})
	}
}

// answerCase is a fixture answer and the metering it must give.
type answerCase struct {
	fixture     string
	request     string // extra fields of the request it answers (`"n":2`), if any
	clientUsage bool
	usage       Usage
	completion  string
}

func (tc answerCase) extra() []string {
	if tc.request == "" {
		return nil
	}
	return []string{tc.request}
}

// testResponses translates non-streamed answers: golden, schema, metering.
func testResponses(t *testing.T, typ string, cases []answerCase) {
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			body := readFixture(t, filepath.Join(typ, tc.fixture))
			resp := newTestResponse(t, typ, false, false, tc.extra()...)
			st, out, err := feed(resp, 200, body[:len(body)/2], body[len(body)/2:])
			require.NoError(t, err)
			assert.Equal(t, 200, st)
			requireSchema(t, schemaCompletion, out)
			golden(t, filepath.Join(typ, goldenName(tc.fixture, ".json")), out)
			assert.Equal(t, tc.usage, resp.Usage())
			assert.Equal(t, tc.completion, resp.Completion())
		})
	}
}

// testStreams translates streamed answers: golden, schema of every event,
// metering, and the same output for the stream cut at every byte offset
// into two pieces and into single bytes.
func testStreams(t *testing.T, typ string, cases []answerCase) {
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			stream := readFixture(t, filepath.Join(typ, tc.fixture))
			resp := newTestResponse(t, typ, true, tc.clientUsage, tc.extra()...)
			st, whole, err := feed(resp, 200, stream)
			require.NoError(t, err)
			assert.Equal(t, 200, st)
			golden(t, filepath.Join(typ, goldenName(tc.fixture, ".sse")), whole)
			assert.Equal(t, tc.usage, resp.Usage())
			assert.Equal(t, tc.completion, resp.Completion())
			requireSameAtEverySplit(t, typ, tc, stream, whole, resp)
			requireStreamSchema(t, whole)
		})
	}
}

// requireSameAtEverySplit feeds the stream cut in two at every offset, and
// byte by byte, and requires the output and metering of the whole.
func requireSameAtEverySplit(t *testing.T, typ string, tc answerCase, stream, whole []byte, ref Response) {
	t.Helper()
	check := func(desc string, pieces ...[]byte) {
		resp := newTestResponse(t, typ, true, tc.clientUsage, tc.extra()...)
		_, got, err := feed(resp, 200, pieces...)
		require.NoError(t, err, desc)
		if !bytes.Equal(whole, got) {
			require.Equal(t, string(whole), string(got), desc)
		}
		require.Equal(t, ref.Usage(), resp.Usage(), desc)
		require.Equal(t, ref.Completion(), resp.Completion(), desc)
	}
	for i := 0; i <= len(stream); i++ {
		check(fmt.Sprintf("split at %d", i), stream[:i], stream[i:])
	}
	bytewise := make([][]byte, 0, len(stream)+1)
	for i := range stream {
		bytewise = append(bytewise, stream[i:i+1])
	}
	check("byte by byte", append(bytewise, nil)...)
}

// errorCase is a provider error body and the client status it must give.
type errorCase struct {
	fixture    string
	status     int
	wantStatus int
	wantCode   string
}

// testErrors translates provider errors, streamed or not, into
// OpenAI-shaped bodies.
func testErrors(t *testing.T, typ string, cases []errorCase) {
	for _, tc := range cases {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%t", tc.fixture, stream), func(t *testing.T) {
				body := readFixture(t, filepath.Join(typ, tc.fixture))
				resp := newTestResponse(t, typ, stream, false)
				st, out, err := feed(resp, tc.status, body[:len(body)/3], body[len(body)/3:])
				require.NoError(t, err)
				assert.Equal(t, tc.wantStatus, st)
				requireSchema(t, schemaError, out)
				var e oaierror.Envelope
				require.NoError(t, json.Unmarshal(out, &e))
				assert.Equal(t, tc.wantCode, e.Error.Code)
				wantStatus, wantBody := UpstreamError(tc.status, body)
				assert.Equal(t, wantStatus, st)
				assert.Equal(t, string(wantBody), string(out))
				if !stream {
					golden(t, filepath.Join(typ, goldenName(tc.fixture, ".json")), out)
				}
				assert.False(t, resp.Usage().Reported)
			})
		}
	}
}

// fuzzStream checks, for any bytes a provider might stream, that the
// translation does not panic, gives the same output however the stream is
// cut, and, for the translating adapters, that a stream translated without
// error is a valid OpenAI stream ending with [DONE]. The same bytes taken as
// a non-streamed answer must not panic either, and give a valid completion
// when they translate. Its seeds are the
// fixture streams, also committed under testdata/fuzz/<target>/.
func fuzzStream(f *testing.F, typ string) {
	files, err := filepath.Glob(filepath.Join("testdata", typ, "stream_*.sse"))
	require.NoError(f, err)
	for _, file := range files {
		if strings.HasSuffix(file, ".golden.sse") {
			continue
		}
		b, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(b, uint(len(b)/2), true)
		if *update {
			dir := filepath.Join("testdata", "fuzz", f.Name())
			require.NoError(f, os.MkdirAll(dir, 0o755))
			seed := fmt.Sprintf("go test fuzz v1\n[]byte(%s)\nuint(%d)\nbool(%t)\n", strconv.Quote(string(b)), len(b)/3, false)
			require.NoError(f, os.WriteFile(filepath.Join(dir, strings.TrimSuffix(filepath.Base(file), ".sse")), []byte(seed), 0o644))
		}
	}
	responses, err := filepath.Glob(filepath.Join("testdata", typ, "response_*.json"))
	require.NoError(f, err)
	for _, file := range responses {
		if strings.HasSuffix(file, ".golden.json") {
			continue
		}
		b, err := os.ReadFile(file)
		require.NoError(f, err)
		f.Add(b, uint(len(b)/2), false)
	}
	translating := typ == config.TypeAnthropic || typ == config.TypeGemini
	f.Fuzz(func(t *testing.T, stream []byte, split uint, clientUsage bool) {
		at := int(split % uint(len(stream)+1))
		_, whole, errWhole := feed(newTestResponse(t, typ, true, clientUsage), 200, stream)
		_, cut, errCut := feed(newTestResponse(t, typ, true, clientUsage), 200, stream[:at], stream[at:])
		require.Equal(t, errWhole == nil, errCut == nil, "whole: %v, cut at %d: %v", errWhole, at, errCut)
		require.Equal(t, string(whole), string(cut), "cut at %d", at)
		if translating && errWhole == nil {
			requireStreamSchema(t, whole)
		}
		// The same bytes as a non-streamed answer.
		_, body, err := feed(newTestResponse(t, typ, false, clientUsage), 200, stream[:at], stream[at:])
		if translating && err == nil {
			requireSchema(t, schemaCompletion, body)
		}
	})
}

// oddCase is an odd but legal answer: the translation must not panic, and
// must end the client's stream with exactly one end.
type oddCase struct {
	name   string
	stream string
	// completed: the answer is whole ([DONE]); otherwise it ends with one
	// error event.
	completed bool
}

// testOddStreams feeds each odd answer, streamed (whole, and cut at every
// byte) and as a non-streamed body, with and without the client's usage.
// A stream ends with [DONE] or one error event, nothing after; every event
// is JSON; for the translating adapters, every event fits OpenAI's schema.
// A non-streamed body translates or is ErrUntranslatable.
func testOddStreams(t *testing.T, typ string, cases []oddCase) {
	translating := typ == config.TypeAnthropic || typ == config.TypeGemini
	for _, tc := range cases {
		for _, clientUsage := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/usage=%t", tc.name, clientUsage), func(t *testing.T) {
				stream := []byte(tc.stream)
				resp := newTestResponse(t, typ, true, clientUsage)
				_, out, err := feed(resp, 200, stream)
				require.NoError(t, err)
				requireOneEnd(t, out, tc.completed)
				if translating {
					requireStreamSchema(t, out)
				}
				assert.Equal(t, tc.completed, resp.Completed(), "%s", out)
				assert.Equal(t, !tc.completed, resp.Failed(), "%s", out)
				for i := 0; i <= len(stream); i++ {
					_, cut, err := feed(newTestResponse(t, typ, true, clientUsage), 200, stream[:i], stream[i:])
					require.NoError(t, err)
					require.Equal(t, string(out), string(cut), "cut at %d", i)
				}
				whole := newTestResponse(t, typ, false, clientUsage)
				_, body, err := feed(whole, 200, stream)
				if err != nil {
					require.ErrorIs(t, err, ErrUntranslatable)
					assert.False(t, whole.Completed())
				} else {
					require.True(t, json.Valid(body), "%s", body)
				}
			})
		}
	}
}

// requireOneEnd checks a client stream's shape: every event is JSON or
// [DONE], and it ends with [DONE] (completed) or one error event, with
// nothing after.
func requireOneEnd(t testing.TB, out []byte, completed bool) {
	t.Helper()
	var p sse.Parser
	p.Feed(out)
	ends := 0
	for {
		ev, ok := p.Next()
		if !ok {
			break
		}
		require.Zero(t, ends, "an event after the stream's end: %q", out)
		switch {
		case len(ev.Data) == 0: // a comment or keep-alive
		case string(ev.Data) == "[DONE]":
			require.True(t, completed, "[DONE] after a broken answer: %q", out)
			ends++
		default:
			require.True(t, json.Valid(ev.Data), "not JSON: %q", ev.Data)
			if bytes.HasPrefix(ev.Data, []byte(`{"error"`)) {
				require.False(t, completed, "an error event in a whole answer: %q", out)
				ends++
			}
		}
	}
	require.Zero(t, p.Pending(), "an unfinished event: %q", out)
	require.Equal(t, 1, ends, "exactly one end: %q", out)
}

// streamedAnswer is a translated stream's content, its deltas joined, and
// its finish reason.
func streamedAnswer(out []byte) (content, finish string) {
	var text strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if data, ok := strings.CutPrefix(line, "data: "); ok && data != "[DONE]" {
			text.WriteString(gjson.Get(data, "choices.0.delta.content").String())
			if f := gjson.Get(data, "choices.0.finish_reason").String(); f != "" {
				finish = f
			}
		}
	}
	return text.String(), finish
}
