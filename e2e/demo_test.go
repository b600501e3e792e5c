package e2e

import (
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/money"
)

// demoConfig serves model "demo" from the built-in demo provider only.
const demoConfig = `key_prefix: tg
providers:
  - {name: demo, type: demo}
models:
  - id: demo
    max_tokens: 4096
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments: [{provider: demo, model: demo}]
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`

// TestTheDemoProviderAnswersThroughTheWholePath: a demo deployment goes
// through the same adapter path as a real provider — a whole answer
// metered from its reported usage, a stream of tool calls, and the
// Responses API by translation — with nothing but tollgate serve running.
func TestTheDemoProviderAnswersThroughTheWholePath(t *testing.T) {
	t.Parallel()
	tg := startTollgate(t, demoConfig, "")
	secret := tg.newAccount(t, "demo@example.com", "10")
	keyID := tg.onlyKeyID(t, "demo@example.com")
	client := tg.client(secret)
	ctx := context.Background()

	resp, err := client.Chat.Completions.New(ctx, paramsFor("demo"))
	require.NoError(t, err)
	assert.Equal(t, `You said: "Say hello.". This is Tollgate's demo model: it answers offline, the same way every time.`,
		resp.Choices[0].Message.Content)
	r := tg.waitRecords(t, keyID, 1)[0]
	assert.Equal(t, "demo", r.Provider)
	assert.False(t, r.Estimated)
	assert.Equal(t, resp.Usage.PromptTokens, r.PromptTokens)
	assert.Equal(t, resp.Usage.CompletionTokens, r.Completion)
	assert.Positive(t, r.Completion)
	assert.Equal(t, costOf(r.PromptTokens, r.Completion), r.Cost)

	got := readStream(t, client.Chat.Completions.NewStreaming(ctx, toolParamsFor("demo")))
	assert.Equal(t, "tool_calls", got.finish)
	require.Len(t, got.toolCalls, 2)
	assert.Equal(t, "get_weather", got.toolCalls[0].name)
	assert.JSONEq(t, `{"city":"Paris"}`, got.toolCalls[0].arguments)
	assert.Equal(t, "get_time", got.toolCalls[1].name)

	answer, err := client.Responses.New(ctx, responses.ResponseNewParams{Model: "demo",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Weather in Paris?")}})
	require.NoError(t, err)
	assert.Contains(t, answer.OutputText(), `You said: "Weather in Paris?"`)
	assert.Positive(t, answer.Usage.InputTokens)
	tg.waitRecords(t, keyID, 3)
}

// TestTheBuiltInEdgeAnswersTheDemoInProcess: as `make run` starts it (no
// gRPC listener for Envoy), tollgate serve opens no socket for the demo
// provider; the built-in edge calls it in process, whichever binding ties
// the edge to ext_proc.
func TestTheBuiltInEdgeAnswersTheDemoInProcess(t *testing.T) {
	t.Parallel()
	for _, b := range []string{"in-process", "grpc"} {
		t.Run(b, func(t *testing.T) {
			tg := serve(t, demoConfig, "", "--edge", b, "--grpc-listen", "")
			secret := tg.newAccount(t, "demo@example.com", "10")
			resp, err := tg.client(secret).Chat.Completions.New(context.Background(), paramsFor("demo"))
			require.NoError(t, err)
			assert.Contains(t, resp.Choices[0].Message.Content, "Tollgate's demo model")
		})
	}
}

// TestTheDemoIsChargedNoMoreThanItHeld: a request with max_tokens 1 that
// offers a tool of 100 string properties, and names a 10,000-character
// word the demo would fill them with, is cut at its one token: a small
// balance is charged at most what the request held, and never goes below
// zero, whole or streamed.
func TestTheDemoIsChargedNoMoreThanItHeld(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(demoConfig, "output_price_per_million: 0.60", "output_price_per_million: 2", 1)
	tg := startTollgate(t, cfg, "")
	const email, balance = "small@example.com", money.Nanos(50_000_000) // $0.05
	secret := tg.newAccount(t, email, "0.05")
	keyID := tg.onlyKeyID(t, email)
	props := make([]string, 100)
	for i := range props {
		props[i] = fmt.Sprintf(`"p%03d":{"type":"string"}`, i)
	}
	word := "W" + strings.Repeat("x", 9999)
	body := `{"model":"demo","max_tokens":1,"messages":[{"role":"user","content":"Tell me about ` + word + `."}],` +
		`"tools":[{"type":"function","function":{"name":"fill","parameters":{"type":"object","properties":{` + strings.Join(props, ",") + `}}}}]}`

	resp, b := tg.post(t, secret, body)
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Equal(t, "length", gjson.GetBytes(b, "choices.0.finish_reason").String())
	assert.LessOrEqual(t, gjson.GetBytes(b, "usage.completion_tokens").Int(), int64(1))
	resp, b = tg.post(t, secret, strings.Replace(body, "{", `{"stream":true,`, 1))
	require.Equal(t, http.StatusOK, resp.StatusCode, "%s", b)
	assert.Contains(t, string(b), `"finish_reason":"length"`)
	assert.Less(t, len(b), 16<<10, "the stream is cut at its one token")

	recs := tg.waitRecords(t, keyID, 2)
	var spent money.Nanos
	for _, r := range recs {
		assert.Equal(t, http.StatusOK, r.Status)
		assert.LessOrEqual(t, r.Completion, int64(1), "the demo reported at most the limit")
		spent += r.Cost
	}
	eventually(t, func() bool { return tg.balance(t, email) == balance-spent }, "debited what the records say")
	assert.GreaterOrEqual(t, int64(tg.balance(t, email)), int64(0), "never below zero")
	assert.NotContains(t, tg.logs.String(), "charged more than it held")
}

// demoAddrRE finds the demo provider's loopback listener in serve's log.
var demoAddrRE = regexp.MustCompile(`"demo":"(127\.0\.0\.1:\d+)"`)

// TestTheDemoPortAnswersOnlyTollgate: with a gRPC listener for Envoy,
// serve answers the demo provider on a loopback port, which anyone on the
// host can reach. Like a real provider it wants a credential, which only
// Tollgate knows: a request without it, or with another, is refused with
// 401 and a log line, while Tollgate's own requests (through Envoy under
// the envoy binding) are answered.
//
// With the credential (which the database keeps, for every replica), a
// body above what Tollgate may send (four times max_body_bytes) is 413.
func TestTheDemoPortAnswersOnlyTollgate(t *testing.T) {
	t.Parallel()
	tg := startTollgate(t, "max_body_bytes: 2048\n"+demoConfig, "")
	secret := tg.newAccount(t, "demo@example.com", "10")
	_, err := tg.client(secret).Chat.Completions.New(context.Background(), paramsFor("demo"))
	require.NoError(t, err)

	m := demoAddrRE.FindStringSubmatch(tg.logs.String())
	require.NotNil(t, m, "serve logs the demo listener's address:\n%s", tg.logs.String())
	body := `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`
	for _, auth := range []string{"", "Bearer " + secret, "Bearer demo-0000"} {
		assert.Equal(t, http.StatusUnauthorized, postDemo(t, m[1], auth, body), "credential %q", auth)
	}
	assert.Equal(t, 3, strings.Count(tg.logs.String(), "request refused without its credential"), "a log line each")
	key, err := tg.Store.SharedSecret(context.Background(), "demo provider credential", []byte("unused"))
	require.NoError(t, err)
	credential := "demo-" + hex.EncodeToString(key)
	assert.NotContains(t, tg.logs.String(), credential, "the credential is never logged")

	for _, c := range []struct {
		body string
		want int
	}{
		{body, http.StatusOK},
		{`{"model":"demo","messages":[{"role":"user","content":"` + strings.Repeat("x", 4*2048+64<<10) + `"}]}`, http.StatusRequestEntityTooLarge},
	} {
		assert.Equal(t, c.want, postDemo(t, m[1], "Bearer "+credential, c.body), "%d bytes with the credential", len(c.body))
	}
}

// postDemo posts a chat request to the demo port at addr, with an
// Authorization header when auth is not empty, and returns the status.
func postDemo(t *testing.T, addr, auth, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}
