package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
)

// The test deployment's static credentials (AWS's documented example keys).
const (
	testAccessKeyID     = "AKIDEXAMPLE"
	testSecretAccessKey = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
)

func noDefaultChain(context.Context, string) (aws.CredentialsProvider, error) {
	return nil, errors.New("the tests use static keys")
}

// bedrockEvents encodes a fixture of event-stream messages (a JSON list of
// {type, name, payload}) with the SDK's encoder, as Bedrock frames them.
func bedrockEvents(t testing.TB, fixture string) []byte {
	t.Helper()
	var evs []struct {
		Type    string          `json:"type"`
		Name    string          `json:"name"`
		Payload json.RawMessage `json:"payload"`
	}
	require.NoError(t, json.Unmarshal(readFixture(t, filepath.Join(config.TypeBedrock, fixture)), &evs))
	var out bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, ev := range evs {
		var m eventstream.Message
		m.Headers.Set(":message-type", eventstream.StringValue(ev.Type))
		if ev.Type == "exception" {
			m.Headers.Set(":exception-type", eventstream.StringValue(ev.Name))
		} else {
			m.Headers.Set(":event-type", eventstream.StringValue(ev.Name))
		}
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		var compact bytes.Buffer
		require.NoError(t, json.Compact(&compact, ev.Payload))
		m.Payload = compact.Bytes()
		require.NoError(t, enc.Encode(&out, m))
	}
	return out.Bytes()
}

func TestBedrockRequestTranslation(t *testing.T) {
	testRequests(t, config.TypeBedrock, []requestCase{
		{"request_chat.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse", up.Path, "the model's colon escaped")
			assert.Equal(t, "bedrock-runtime.us-east-1.amazonaws.com", up.Authority)
			assert.Equal(t, `[{"text":"You are an app that creates playlists for a radio station."},{"text":"Only songs from the 1990s."}]`,
				gjson.GetBytes(b, "system").Raw)
			assert.Equal(t, `["user","assistant","user"]`, gjson.GetBytes(b, "messages.#.role").Raw)
			assert.Equal(t, `{"format":"png","source":{"bytes":"iVBORw0KGgo="}}`, gjson.GetBytes(b, "messages.0.content.1.image").Raw)
			assert.Equal(t, `{"maxTokens":512,"temperature":1,"topP":0.9,"stopSequences":["\n\nHuman:"]}`, gjson.GetBytes(b, "inferenceConfig").Raw)
			assert.False(t, gjson.GetBytes(b, "toolConfig").Exists())
		}},
		{"request_tools.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.True(t, strings.HasSuffix(up.Path, "/converse-stream"))
			assert.Contains(t, up.Headers, Header{"accept", BedrockStreamType})
			assert.Equal(t, `{"tool":{"name":"top_song"}}`, gjson.GetBytes(b, "toolConfig.toolChoice").Raw)
			assert.Equal(t, "top_song", gjson.GetBytes(b, "toolConfig.tools.0.toolSpec.name").String())
			assert.Equal(t, `["sign"]`, gjson.GetBytes(b, "toolConfig.tools.0.toolSpec.inputSchema.json.required").Raw)
			assert.Equal(t, `{"toolUseId":"tooluse_kZJMlvQmRJ6eAyJE5GIl7Q","name":"top_song","input":{"sign":"WZPZ"}}`,
				gjson.GetBytes(b, "messages.1.content.0.toolUse").Raw)
			assert.Equal(t, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q", gjson.GetBytes(b, "messages.2.content.0.toolResult.toolUseId").String())
			assert.EqualValues(t, 8192, gjson.GetBytes(b, "inferenceConfig.maxTokens").Int(), "the model's max_tokens")
		}},
		{"request_structured.json", func(t *testing.T, up Upstream) {
			b := up.Body
			assert.Equal(t, `{"tool":{"name":"json_answer"}}`, gjson.GetBytes(b, "toolConfig.toolChoice").Raw, "forced: the client has no tools")
			assert.Equal(t, "json_answer", gjson.GetBytes(b, "toolConfig.tools.0.toolSpec.name").String())
			assert.Equal(t, `["name","date","participants"]`, gjson.GetBytes(b, "toolConfig.tools.0.toolSpec.inputSchema.json.required").Raw, "the client's schema")
			assert.Equal(t, "Extract the event.", gjson.GetBytes(b, "system.0.text").String())
		}},
		{"request_required.json", func(t *testing.T, up Upstream) {
			assert.Equal(t, `{"any":{}}`, gjson.GetBytes(up.Body, "toolConfig.toolChoice").Raw)
			assert.Equal(t, `{"type":"object","properties":{}}`, gjson.GetBytes(up.Body, "toolConfig.tools.0.toolSpec.inputSchema.json").Raw)
		}},
	})
}

// header returns the value of the named header of up.
func header(up Upstream, name string) string {
	for _, h := range up.Headers {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}

// TestBedrockSignatureCoversWhatReachesAWS: an independent SigV4 signature,
// computed by AWS's signer from the request as it goes on the wire (the
// path, host, body and signed headers), equals the adapter's; it signs
// exactly host, content-type, x-amz-content-sha256 and x-amz-date, over
// the body's hash, and a changed body no longer matches.
func TestBedrockSignatureCoversWhatReachesAWS(t *testing.T) {
	body := readFixture(t, "bedrock/request_chat.json")
	up, _, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: body}, testTarget(config.TypeBedrock))
	require.NoError(t, err)
	auth := header(up, "authorization")
	require.True(t, strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20250615/us-east-1/bedrock/aws4_request, "), auth)
	assert.Contains(t, auth, "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date,")
	assert.NotContains(t, auth, testSecretAccessKey)
	sum := sha256.Sum256(up.Body)
	assert.Equal(t, hex.EncodeToString(sum[:]), header(up, "x-amz-content-sha256"))
	assert.Equal(t, "20250615T150640Z", header(up, "x-amz-date"))

	resign := func(body []byte) string {
		r, err := http.NewRequest(http.MethodPost, "https://"+up.Authority+up.Path, nil)
		require.NoError(t, err)
		for _, name := range []string{"content-type", "x-amz-content-sha256"} {
			r.Header.Set(name, header(up, name))
		}
		sum := sha256.Sum256(body)
		at, err := time.Parse("20060102T150405Z", header(up, "x-amz-date"))
		require.NoError(t, err)
		require.NoError(t, v4.NewSigner().SignHTTP(context.Background(),
			aws.Credentials{AccessKeyID: testAccessKeyID, SecretAccessKey: testSecretAccessKey},
			r, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", at))
		return r.Header.Get("Authorization")
	}
	assert.Equal(t, auth, resign(up.Body))
	assert.NotEqual(t, auth, resign(append(bytes.Clone(up.Body), ' ')), "the signature covers the body")
}

// TestBedrockCredentialsAreCachedAndRefreshedBeforeExpiry: the default
// chain is loaded once per provider; its credentials are fetched once
// while far from expiry, and again for every request once they are within
// the refresh window (bedrockExpiryWindow) of it.
func TestBedrockCredentialsAreCachedAndRefreshedBeforeExpiry(t *testing.T) {
	for _, tc := range []struct {
		name      string
		expiresIn time.Duration
		fetches   int
	}{
		{"an hour from expiry", time.Hour, 1},
		{"a minute from expiry", time.Minute, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			loads, fetches := 0, 0
			a := bedrock{env: testEnv, creds: &bedrockCredentials{load: func(context.Context, string) (aws.CredentialsProvider, error) {
				loads++
				return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
					fetches++
					return aws.Credentials{AccessKeyID: "ASIATEMP", SecretAccessKey: "s3cr3t", SessionToken: "tok", CanExpire: true,
						Expires: time.Now().Add(tc.expiresIn)}, nil
				}), nil
			}}}
			target := testTarget(config.TypeBedrock)
			target.Provider.AccessKeyID, target.Provider.SecretAccessKey = "", ""
			for range 3 {
				_, _, err := a.Translate(&Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`)}, target)
				require.NoError(t, err)
			}
			assert.Equal(t, 1, loads, "the chain is loaded once")
			assert.Equal(t, tc.fetches, fetches)
		})
	}
}

// TestBedrockCredentialFailuresAreCredentialErrors: every way AWS
// credentials cannot be had — the default chain finds none, the source
// cannot fetch or refresh them, they expired, or static keys are empty —
// is ErrCredential (the attempt fails over as a provider failure would),
// naming the provider and no secret; nothing is signed.
func TestBedrockCredentialFailuresAreCredentialErrors(t *testing.T) {
	fetched := func(c aws.Credentials, err error) func(context.Context, string) (aws.CredentialsProvider, error) {
		return func(context.Context, string) (aws.CredentialsProvider, error) {
			return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) { return c, err }), nil
		}
	}
	for _, tc := range []struct {
		name         string
		load         func(context.Context, string) (aws.CredentialsProvider, error)
		key, secret  string
		wantInReason string
	}{
		{name: "the chain finds no credentials", load: noDefaultChain, wantInReason: "loading AWS credentials"},
		{name: "the role's endpoint fails", load: fetched(aws.Credentials{}, errors.New("ec2 IMDS role: connection refused")), wantInReason: "connection refused"},
		{name: "the credentials expired", load: fetched(aws.Credentials{AccessKeyID: "ASIATEMP", SecretAccessKey: "s3cr3t-expired", SessionToken: "tok",
			CanExpire: true, Expires: testEnv.now().Add(-time.Minute)}, nil), wantInReason: "expired"},
		{name: "the source hands back no keys", load: fetched(aws.Credentials{}, nil), wantInReason: "no keys"},
		{name: "static keys without a secret", key: "AKIDEXAMPLE", wantInReason: "AWS credentials"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := bedrock{env: testEnv, creds: &bedrockCredentials{load: tc.load}}
			target := testTarget(config.TypeBedrock)
			target.Provider.AccessKeyID, target.Provider.SecretAccessKey = config.Secret(tc.key), config.Secret(tc.secret)
			_, _, err := a.Translate(&Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`)}, target)
			require.ErrorIs(t, err, ErrCredential)
			assert.Contains(t, err.Error(), target.Provider.Name)
			assert.Contains(t, err.Error(), tc.wantInReason)
			assert.NotContains(t, err.Error(), "s3cr3t")
		})
	}
}

func TestBedrockTemporaryCredentialsSignTheirToken(t *testing.T) {
	a := bedrock{env: testEnv, creds: &bedrockCredentials{load: func(context.Context, string) (aws.CredentialsProvider, error) {
		return aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "ASIATEMP", SecretAccessKey: "s3cr3t", SessionToken: "tok-123", CanExpire: true,
				Expires: testEnv.now().Add(time.Hour)}, nil
		}), nil
	}}}
	target := testTarget(config.TypeBedrock)
	target.Provider.AccessKeyID, target.Provider.SecretAccessKey = "", ""
	up, _, err := a.Translate(&Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`)}, target)
	require.NoError(t, err)
	assert.Equal(t, "tok-123", header(up, "x-amz-security-token"))
	assert.Contains(t, header(up, "authorization"), "Credential=ASIATEMP/")
	assert.Contains(t, header(up, "authorization"), ";x-amz-security-token,", "the token is signed")
}

func TestBedrockAPIKeyIsABearerTokenWithoutSignature(t *testing.T) {
	target := testTarget(config.TypeBedrock)
	target.Provider.AccessKeyID, target.Provider.SecretAccessKey, target.Provider.APIKey = "", "", "ABSKbedrockapikey"
	up, _, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`)}, target)
	require.NoError(t, err)
	assert.Equal(t, "Bearer ABSKbedrockapikey", header(up, "authorization"))
	assert.Empty(t, header(up, "x-amz-date"))
}

func TestBedrockAuthorityDropsTheDefaultPort(t *testing.T) {
	target := testTarget(config.TypeBedrock)
	target.Provider.BaseURL = "https://bedrock-runtime.us-east-1.amazonaws.com:443"
	up, _, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`)}, target)
	require.NoError(t, err)
	assert.Equal(t, "bedrock-runtime.us-east-1.amazonaws.com", up.Authority, "the signed host and the Host header agree")
}

// TestBedrockCacheMarksBecomeCachePoints: a cache_control mark (what the
// Messages API's translation carries) becomes a cachePoint block after
// what it marks — a system text, a content part, a tool result, a tool —
// and a request without marks has none.
func TestBedrockCacheMarksBecomeCachePoints(t *testing.T) {
	body := `{"messages":[
{"role":"system","content":[{"type":"text","text":"Rules.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Today."}]},
{"role":"user","content":[{"type":"text","text":"Read it.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"Now."}]},
{"role":"assistant","tool_calls":[{"id":"t1","type":"function","function":{"name":"a","arguments":"{}"}}]},
{"role":"tool","tool_call_id":"t1","content":[{"type":"text","text":"42","cache_control":{"type":"ephemeral"}}]}],
"tools":[{"type":"function","function":{"name":"a"},"cache_control":{"type":"ephemeral"}},{"type":"function","function":{"name":"b"}}]}`
	up, _, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: []byte(body)}, testTarget(config.TypeBedrock))
	require.NoError(t, err)
	point := `{"cachePoint":{"type":"default"}}`
	assert.JSONEq(t, `[{"text":"Rules."},`+point+`,{"text":"Today."}]`, gjson.GetBytes(up.Body, "system").Raw)
	assert.JSONEq(t, `[{"text":"Read it."},`+point+`,{"text":"Now."}]`, gjson.GetBytes(up.Body, "messages.0.content").Raw)
	assert.JSONEq(t, point, gjson.GetBytes(up.Body, "messages.2.content.1").Raw, "after the tool result")
	assert.EqualValues(t, 3, gjson.GetBytes(up.Body, "toolConfig.tools.#").Int())
	assert.Equal(t, "a", gjson.GetBytes(up.Body, "toolConfig.tools.0.toolSpec.name").String())
	assert.JSONEq(t, point, gjson.GetBytes(up.Body, "toolConfig.tools.1").Raw, "after the tool it marks")

	plain, _, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: []byte(strings.ReplaceAll(body, `,"cache_control":{"type":"ephemeral"}`, ""))}, testTarget(config.TypeBedrock))
	require.NoError(t, err)
	assert.NotContains(t, string(plain.Body), "cachePoint")
	assert.JSONEq(t, `[{"text":"Rules.Today."}]`, gjson.GetBytes(plain.Body, "system").Raw, "a system message is one block, as before")
}

func TestBedrockRejectsWhatItCannotExpress(t *testing.T) {
	tests := []struct {
		name, body string
	}{
		{"image URL", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`},
		{"bmp image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,AAAA"}}]}]}`},
		{"tool message without id", `{"messages":[{"role":"tool","content":"x"}]}`},
		{"tool_choice none with tool history", `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`},
		{"response_format beside a tool of its name", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},"tools":[{"type":"function","function":{"name":"json_answer"}}]}`},
		{"unknown parameter", `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"low"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: []byte(tt.body)}, testTarget(config.TypeBedrock))
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrUnsupportedRequest), "%v", err)
		})
	}
}

// TestBedrockStructuredOutput: response_format becomes a tool whose input
// schema is the one asked for — forced without the client's tools, one
// tool among theirs (some tool must be used) with them — and its input
// comes back as the message's content, whole and streamed, with
// finish_reason stop and no tool call.
func TestBedrockStructuredOutput(t *testing.T) {
	req := readFixture(t, filepath.Join(config.TypeBedrock, "request_structured.json"))
	for _, stream := range []bool{false, true} {
		fixture := "response_structured.json"
		body := req
		var answer []byte
		if stream {
			fixture = "stream_structured.events.json"
			body = []byte(strings.Replace(string(req), `"max_tokens": 200`, `"max_tokens": 200, "stream": true`, 1))
			answer = bedrockEvents(t, fixture)
		} else {
			answer = readFixture(t, filepath.Join(config.TypeBedrock, fixture))
		}
		t.Run(fixture, func(t *testing.T) {
			_, resp, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: body, Stream: stream}, testTarget(config.TypeBedrock))
			require.NoError(t, err)
			_, out, err := feed(resp, 200, answer)
			require.NoError(t, err)
			content := gjson.GetBytes(out, "choices.0.message.content").String()
			finish := gjson.GetBytes(out, "choices.0.finish_reason").String()
			if stream {
				requireStreamSchema(t, out)
				golden(t, filepath.Join(config.TypeBedrock, "stream_structured.golden.sse"), out)
				content, finish = streamedAnswer(out)
			} else {
				requireSchema(t, "CreateChatCompletionResponse", out)
				golden(t, filepath.Join(config.TypeBedrock, goldenName(fixture, ".json")), out)
			}
			assert.JSONEq(t, `{"name":"Science fair","date":"Friday","participants":["Alice","Bob"]}`, content)
			assert.Equal(t, "stop", finish)
			assert.NotContains(t, string(out), "tool_calls", "the structured answer is not a call")
			assert.Equal(t, Usage{PromptTokens: 412, CompletionTokens: 58, Reported: true}, resp.Usage())
		})
	}

	withTools := `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"},` +
		`"tools":[{"type":"function","function":{"name":"top_song"}}]}`
	up, resp, err := testAdapter(config.TypeBedrock).Translate(&Request{Body: []byte(withTools)}, testTarget(config.TypeBedrock))
	require.NoError(t, err)
	assert.Equal(t, `["top_song","json_answer"]`, gjson.GetBytes(up.Body, "toolConfig.tools.#.toolSpec.name").Raw)
	assert.Equal(t, `{"any":{}}`, gjson.GetBytes(up.Body, "toolConfig.toolChoice").Raw, "a tool must be used: theirs, or the answer")
	assert.Equal(t, `{"type":"object"}`, gjson.GetBytes(up.Body, "toolConfig.tools.1.toolSpec.inputSchema.json").Raw, "json_object: any object")
	_, out, err := feed(resp, 200, []byte(`{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"top_song","input":{"sign":"WZPZ"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":5,"outputTokens":3}}`))
	require.NoError(t, err)
	assert.Equal(t, "top_song", gjson.GetBytes(out, "choices.0.message.tool_calls.0.function.name").String(), "the client's tool is still a call")
	assert.Equal(t, "tool_calls", gjson.GetBytes(out, "choices.0.finish_reason").String())
}

func TestBedrockResponseTranslation(t *testing.T) {
	testResponses(t, config.TypeBedrock, []answerCase{
		{fixture: "response_text.json", usage: Usage{PromptTokens: 125, CompletionTokens: 60, Reported: true},
			completion: "Here is a list of 3 pop songs by artists from the United Kingdom:\n\n1. \"Wannabe\" by Spice Girls\n2. \"Wonderwall\" by Oasis\n3. \"Back for Good\" by Take That"},
		{fixture: "response_tool_use.json", usage: Usage{PromptTokens: 375 + 1800 + 200, CompletionTokens: 72, CachedTokens: 1800, CacheWriteTokens: 200, Reported: true},
			completion: "I'll look up the most popular song on WZPZ." + `{"sign":"WZPZ"}`},
		{fixture: "response_max_tokens.json", usage: Usage{PromptTokens: 125, CompletionTokens: 5, Reported: true}, completion: `1. "Wannabe"`},
		{fixture: "response_guardrail.json", usage: Usage{PromptTokens: 40, Reported: true}, completion: "Sorry, the model cannot answer this question."},
		// The reasoning is output: the text it shows, then the answer's.
		{fixture: "response_reasoning.json", usage: Usage{PromptTokens: 125, CompletionTokens: 96, Reported: true},
			completion: "\"Wannabe\" by Spice Girls, \"Wonderwall\" by Oasis and \"Back for Good\" by Take That." +
				"The user wants three pop songs by UK artists. Spice Girls, Oasis and Take That each had a number one."},
	})
	for fixture, finish := range map[string]string{"response_text.json": "stop", "response_tool_use.json": "tool_calls",
		"response_max_tokens.json": "length", "response_guardrail.json": "content_filter"} {
		got := readFixture(t, filepath.Join("bedrock", goldenName(fixture, ".json")))
		assert.Equal(t, finish, gjson.GetBytes(got, "choices.0.finish_reason").String(), fixture)
	}
}

// TestBedrockStreamTranslation translates event streams: golden, schema,
// metering, and the same output however the frames are cut.
func TestBedrockStreamTranslation(t *testing.T) {
	cases := []struct {
		answerCase
		completed bool
	}{
		{answerCase{fixture: "stream_text.events.json", clientUsage: true,
			usage:      Usage{PromptTokens: 1125, CompletionTokens: 28, CachedTokens: 1000, Reported: true},
			completion: `Here is a list of 3 pop songs: "Wannabe", "Wonderwall" and "Back for Good".`}, true},
		{answerCase{fixture: "stream_tool_use.events.json",
			usage:      Usage{PromptTokens: 375 + 2200, CompletionTokens: 72, CacheWriteTokens: 2200, Reported: true},
			completion: `Let me check.{"sign": "WZPZ"}`}, true},
		{answerCase{fixture: "stream_reasoning.events.json",
			usage:      Usage{PromptTokens: 125, CompletionTokens: 96, Reported: true},
			completion: `The user wants three pop songs by UK artists."Wannabe", "Wonderwall" and "Back for Good".`}, true},
		{answerCase{fixture: "stream_exception.events.json", completion: "Here is"}, false},
		{answerCase{fixture: "stream_cut.events.json", completion: "Here is"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.fixture, func(t *testing.T) {
			stream := bedrockEvents(t, tc.fixture)
			resp := newTestResponse(t, config.TypeBedrock, true, tc.clientUsage)
			st, whole, err := feed(resp, 200, stream)
			require.NoError(t, err)
			assert.Equal(t, 200, st)
			golden(t, filepath.Join(config.TypeBedrock, strings.TrimSuffix(tc.fixture, ".events.json")+".golden.sse"), whole)
			assert.Equal(t, tc.usage, resp.Usage())
			assert.Equal(t, tc.completion, resp.Completion())
			assert.Equal(t, tc.completed, resp.Completed())
			assert.Equal(t, !tc.completed, resp.Failed())
			requireOneEnd(t, whole, tc.completed)
			requireStreamSchema(t, whole)
			requireSameAtEverySplit(t, config.TypeBedrock, tc.answerCase, stream, whole, resp)
		})
	}
}

func TestBedrockStreamWithABrokenFrameIsAnError(t *testing.T) {
	stream := bedrockEvents(t, "stream_text.events.json")
	stream[len(stream)-1] ^= 0xff // the last frame's CRC
	resp := newTestResponse(t, config.TypeBedrock, true, false)
	_, out, err := feed(resp, 200, stream)
	require.Error(t, err)
	assert.Contains(t, string(out), `"finish_reason":"stop"`, "what came before is kept")
	assert.True(t, resp.Failed())
}

func TestBedrockErrors(t *testing.T) {
	testErrors(t, config.TypeBedrock, []errorCase{
		{"error_400.json", 400, 400, "invalid_request"},
		{"error_403.json", 403, 500, "internal_error"},
		{"error_429.json", 429, 503, "no_available_workers"},
	})
}

// FuzzBedrockStream: for any bytes Bedrock might stream, the translation
// does not panic, gives the same output however the bytes are cut, and a
// stream translated without error is a valid OpenAI stream with one end.
// Its seeds are the fixture event streams.
func FuzzBedrockStream(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", config.TypeBedrock, "stream_*.events.json"))
	require.NoError(f, err)
	for _, file := range files {
		b := bedrockEvents(f, filepath.Base(file))
		f.Add(b, uint(len(b)/2), true)
		f.Add(b, uint(len(b)/3), false)
	}
	responses, err := filepath.Glob(filepath.Join("testdata", config.TypeBedrock, "response_*.json"))
	require.NoError(f, err)
	for _, file := range responses {
		if !strings.HasSuffix(file, ".golden.json") {
			b, err := os.ReadFile(file)
			require.NoError(f, err)
			f.Add(b, uint(len(b)/2), false)
		}
	}
	f.Fuzz(func(t *testing.T, stream []byte, split uint, clientUsage bool) {
		at := int(split % uint(len(stream)+1))
		resp := newTestResponse(t, config.TypeBedrock, true, clientUsage)
		_, whole, errWhole := feed(resp, 200, stream)
		_, cut, errCut := feed(newTestResponse(t, config.TypeBedrock, true, clientUsage), 200, stream[:at], stream[at:])
		require.Equal(t, errWhole == nil, errCut == nil, "whole: %v, cut at %d: %v", errWhole, at, errCut)
		require.Equal(t, string(whole), string(cut), "cut at %d", at)
		if errWhole == nil {
			requireStreamSchema(t, whole)
			requireOneEnd(t, whole, resp.Completed())
		}
		_, body, err := feed(newTestResponse(t, config.TypeBedrock, false, clientUsage), 200, stream[:at], stream[at:])
		if err == nil {
			requireSchema(t, schemaCompletion, body)
		}
	})
}
