package e2e

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/mockllm"
)

// postMessages sends a raw Messages API request as an Anthropic SDK does
// (the key as a bearer token: ext_authz's x-api-key is its own test's).
func postMessages(t *testing.T, tg *tollgate, secret, path, body string) (int, string, http.Header) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.BaseURL+path, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

// sseNames are the event names of an Anthropic stream, in order.
func sseNames(stream string) []string {
	var out []string
	for _, line := range strings.Split(stream, "\n") {
		if name, ok := strings.CutPrefix(line, "event: "); ok {
			out = append(out, name)
		}
	}
	return out
}

func TestTheMessagesAPIOnEveryProviderIsAnsweredAndBilled(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	for _, k := range providerKinds {
		t.Run(k.kind, func(t *testing.T) {
			t.Parallel()
			email := k.kind + "-messages@example.com"
			secret := tg.newAccount(t, email, "10")
			keyID := tg.onlyKeyID(t, email)
			body := `{"model":"` + k.model + `","max_tokens":200,"system":"be brief","metadata":{"user_id":"user_abc"},"messages":[{"role":"user","content":"Weather in Paris?"}]}`

			st, answer, _ := postMessages(t, tg, secret, "/messages", body)
			require.Equal(t, 200, st, answer)
			assert.Equal(t, "message", gjson.Get(answer, "type").String(), answer)
			assert.Equal(t, k.model, gjson.Get(answer, "model").String(), "the model asked")
			assert.Equal(t, mockFullText(), gjson.Get(answer, "content.0.text").String(), answer)
			assert.Equal(t, "end_turn", gjson.Get(answer, "stop_reason").String())
			assert.Positive(t, gjson.Get(answer, "usage.output_tokens").Int(), answer)

			st, stream, h := postMessages(t, tg, secret, "/messages", strings.Replace(body, "{", `{"stream":true,`, 1))
			require.Equal(t, 200, st, stream)
			assert.Contains(t, h.Get("Content-Type"), "text/event-stream")
			names := sseNames(stream)
			require.NotEmpty(t, names, stream)
			assert.Equal(t, "message_start", names[0], stream)
			assert.Equal(t, []string{"message_delta", "message_stop"}, names[len(names)-2:], stream)
			assert.Contains(t, names, "content_block_delta")

			recs := tg.waitRecords(t, keyID, 2)
			for _, r := range recs {
				assert.Equal(t, 200, r.Status)
				assert.Equal(t, k.kind, r.Provider)
				assert.Positive(t, int64(r.Cost), "billed")
				assert.False(t, r.Estimated, "the provider's own counts")
			}
		})
	}
}

func TestCountTokensIsFreeAndAnEmptyAccountIsRefusedMessages(t *testing.T) {
	t.Parallel()
	tg, _ := startWithEveryProvider(t)
	secret := tg.newAccount(t, "messages-empty@example.com", "0")
	keyID := tg.onlyKeyID(t, "messages-empty@example.com")
	body := `{"model":"gpt-4o-mini","max_tokens":200,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	// The shape of a refusal ext_authz makes is its own test's; the
	// status is the same either way.
	st, answer, _ := postMessages(t, tg, secret, "/messages", body)
	assert.Equal(t, http.StatusPaymentRequired, st, answer)

	funded := tg.newAccount(t, "messages-count@example.com", "10")
	countedKey := tg.onlyKeyID(t, "messages-count@example.com")
	st, counted, _ := postMessages(t, tg, funded, "/messages/count_tokens", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	require.Equal(t, 200, st, counted)
	assert.Positive(t, gjson.Get(counted, "input_tokens").Int(), counted)
	// An Anthropic deployment counts itself: the mock counts the prompt as
	// its answer's usage does.
	st, exact, _ := postMessages(t, tg, funded, "/messages/count_tokens", `{"model":"claude-sonnet","messages":[{"role":"user","content":"Weather in Paris?"}]}`)
	require.Equal(t, 200, st, exact)
	assert.Equal(t, mockUsage["anthropic"][0], gjson.Get(exact, "input_tokens").Int(), "the provider's count: %s", exact)
	assert.Empty(t, tg.usageRecords(t, countedKey), "counting is not billed")
	assert.Empty(t, tg.usageRecords(t, keyID))
}

func TestAClaudeStreamPassesThroughWithItsThinkingAndHeaders(t *testing.T) {
	t.Parallel()
	tg, mocks := startWithEveryProvider(t)
	secret := tg.newAccount(t, "messages-thinking@example.com", "10")
	keyID := tg.onlyKeyID(t, "messages-thinking@example.com")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	body := `{"model":"claude-sonnet","max_tokens":2000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},` +
		`"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, tg.BaseURL+"/messages", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("anthropic-beta", "interleaved-thinking-2025-05-14")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	stream := string(b)
	require.Equal(t, 200, resp.StatusCode, stream)
	for _, want := range []string{`"thinking_delta"`, `"signature_delta"`, `"model":"claude-sonnet"`, "event: message_stop"} {
		assert.Contains(t, stream, want)
	}
	var got *mockllm.Request
	for _, r := range mocks["anthropic"].received() {
		if r.Path == "/v1/messages" {
			got = &r
		}
	}
	require.NotNil(t, got, "the request reached Anthropic")
	assert.Equal(t, "interleaved-thinking-2025-05-14", got.Header.Get("anthropic-beta"))
	assert.Equal(t, "claude-sonnet-4-5", got.Body["model"])
	assert.NotNil(t, got.Body["thinking"], "the client's request, as it wrote it")
	assert.Empty(t, got.Header.Get("authorization"), "never the client's key")
	recs := tg.waitRecords(t, keyID, 1)
	assert.Equal(t, mockUsage["anthropic"][0], recs[0].PromptTokens)
	assert.False(t, recs[0].Estimated)
}
