package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
)

func chatParams() openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{
			openai.SystemMessage("You are terse."),
			openai.UserMessage("Say hello."),
		},
	}
}

// usageJSON is a key's usage as the tests read it, from `tollgate key
// usage --json` (the management API's shape, over its last 30 days).
type usageJSON struct {
	TotalRequests    int64
	TotalCostUSD     money.Nanos
	PromptTokens     int64
	CompletionTokens int64
	ErrorRate        float64
	ByModel          []manage.ModelUsageJSON
}

func (tg *tollgate) keyUsage(t *testing.T, keyID string) usageJSON {
	t.Helper()
	var v manage.UsageJSON
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "key", "usage", keyID, "--json")), &v))
	u := usageJSON{TotalRequests: v.Totals.Requests, TotalCostUSD: v.Totals.CostUSD, PromptTokens: v.Totals.PromptTokens,
		CompletionTokens: v.Totals.CompletionTokens, ByModel: v.ByModel}
	if u.TotalRequests > 0 {
		u.ErrorRate = float64(v.Totals.ErrorRequests) / float64(u.TotalRequests)
	}
	return u
}

func (tg *tollgate) onlyKeyID(t *testing.T, email string) string {
	t.Helper()
	var keys []struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "key", "list", "--account", email, "--json")), &keys))
	require.Len(t, keys, 1)
	return keys[0].ID
}

func (tg *tollgate) balance(t *testing.T, email string) money.Nanos {
	t.Helper()
	var a struct {
		Balance money.Nanos `json:"balance_usd"`
	}
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "account", "show", "--email", email, "--json")), &a))
	return a.Balance
}

// 9 prompt tokens at $0.15/M and 5 completion tokens at $0.60/M.
const mockCost = money.Nanos(9*150 + 5*600)

func TestNonStreamedCompletionIsMeteredAndCharged(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	c := tg.client(secret)
	resp, err := c.Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err)
	assert.Equal(t, "Hello from the mock.", resp.Choices[0].Message.Content)
	assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
	assert.Equal(t, int64(9), resp.Usage.PromptTokens)
	assert.Equal(t, int64(5), resp.Usage.CompletionTokens)

	got := p.received()
	require.Len(t, got, 1)
	assert.Equal(t, "gpt-4o-mini-2024-07-18", got[0].Body["model"], "the model is rewritten to the provider's name")
	assert.Equal(t, "Bearer sk-provider-secret", got[0].Header.Get("Authorization"), "the client's key is replaced by the provider's")
	for name := range got[0].Header {
		assert.NotContains(t, strings.ToLower(name), "x-tollgate", "internal headers never reach a provider")
	}
	assert.NotContains(t, got[0].Body, "stream_options")

	eventually(t, func() bool { return tg.keyUsage(t, keyID).TotalRequests == 1 }, "usage recorded")
	u := tg.keyUsage(t, keyID)
	assert.Equal(t, int64(9), u.PromptTokens)
	assert.Equal(t, int64(5), u.CompletionTokens)
	assert.Equal(t, mockCost, u.TotalCostUSD)
	assert.Equal(t, 10*money.PerDollar-mockCost, tg.balance(t, "me@example.com"), "the balance fell by exactly the cost")
}

func TestStreamedCompletionStripsTheUsageChunkTheClientDidNotAskFor(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	stream := tg.client(secret).Chat.Completions.NewStreaming(context.Background(), chatParams())
	var text strings.Builder
	finish := ""
	for stream.Next() {
		chunk := stream.Current()
		assert.False(t, chunk.JSON.Usage.Valid() && chunk.Usage.TotalTokens > 0, "no usage chunk unless asked")
		assert.Equal(t, "chat.completion.chunk", string(chunk.Object))
		if len(chunk.Choices) > 0 {
			text.WriteString(chunk.Choices[0].Delta.Content)
			if chunk.Choices[0].FinishReason != "" {
				finish = string(chunk.Choices[0].FinishReason)
			}
		} else {
			t.Errorf("a chunk without choices reached the client: %s", chunk.RawJSON())
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "Hello from the mock.", text.String())
	assert.Equal(t, "stop", finish)

	got := p.received()
	require.Len(t, got, 1)
	assert.Equal(t, map[string]any{"include_usage": true}, got[0].Body["stream_options"], "Tollgate asks the provider for usage")

	eventually(t, func() bool { return tg.keyUsage(t, keyID).TotalRequests == 1 }, "usage recorded")
	u := tg.keyUsage(t, keyID)
	assert.Equal(t, int64(9), u.PromptTokens)
	assert.Equal(t, int64(5), u.CompletionTokens)
	assert.Equal(t, mockCost, u.TotalCostUSD)
	assert.Equal(t, 10*money.PerDollar-mockCost, tg.balance(t, "me@example.com"))
}

func TestStreamedCompletionKeepsTheUsageChunkTheClientAskedFor(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")

	params := chatParams()
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := tg.client(secret).Chat.Completions.NewStreaming(context.Background(), params)
	var usage openai.CompletionUsage
	for stream.Next() {
		if c := stream.Current(); c.Usage.TotalTokens > 0 {
			usage = c.Usage
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, int64(9), usage.PromptTokens)
	assert.Equal(t, int64(5), usage.CompletionTokens)
}

func TestStreamEndsWithTheDoneEventOnTheWire(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")

	req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions", strings.NewReader(
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NotEmpty(t, lines)
	var data []string
	for i, l := range lines {
		if l == "" {
			continue
		}
		require.True(t, strings.HasPrefix(l, "data: "), "line %d is an event: %q", i, l)
		data = append(data, l)
		require.Equal(t, "", lines[i+1], "a blank line follows every event")
	}
	assert.Equal(t, "data: [DONE]", data[len(data)-1])
	for _, d := range data[:len(data)-1] {
		var chunk map[string]any
		require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(d, "data: ")), &chunk))
		assert.NotEmpty(t, chunk["choices"])
	}
}

func TestKeysThatMayNotCallAreRefusedWith401(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	tg := startTollgate(t, configFor(p.URL), "")
	good := tg.newAccount(t, "me@example.com", "10")
	disabled := tg.newKey(t, "me@example.com", "--disabled")
	deleted := tg.newKey(t, "me@example.com")
	var keys []struct {
		ID      string `json:"id"`
		Enabled bool   `json:"enabled"`
	}
	require.NoError(t, json.Unmarshal([]byte(tg.run(t, "key", "list", "--account", "me@example.com", "--json")), &keys))
	require.Len(t, keys, 3)
	tg.run(t, "key", "delete", keys[0].ID) // newest first: the last one made

	tests := []struct {
		name   string
		header string
		code   string
	}{
		{"missing key", "", "missing_api_key"},
		{"not a bearer token", "Basic abc", "missing_api_key"},
		{"unknown key", "Bearer tg_sk_" + strings.Repeat("A", 43), "invalid_api_key"},
		{"garbage", "Bearer nonsense", "invalid_api_key"},
		{"disabled key", "Bearer " + disabled, "key_disabled"},
		{"deleted key", "Bearer " + deleted, "invalid_api_key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions",
				strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
			require.NoError(t, err)
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
			var body struct {
				Error struct {
					Code, Type, Message string
					Param               *string
				}
			}
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&body))
			assert.Equal(t, tt.code, body.Error.Code)
			assert.Equal(t, "authentication_error", body.Error.Type)
			assert.NotEmpty(t, body.Error.Message)
		})
	}

	// The SDK surfaces the same error unchanged.
	_, err := tg.client(disabled).Chat.Completions.New(context.Background(), chatParams())
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusUnauthorized, apiErr.StatusCode)
	assert.Equal(t, "key_disabled", apiErr.Code)

	_, err = tg.client(good).Chat.Completions.New(context.Background(), chatParams())
	require.NoError(t, err)
	assert.Len(t, p.received(), 1, "refused requests never reach the provider")
}

func TestClientThatLeavesMidStreamIsBilledForWhatWasProduced(t *testing.T) {
	t.Parallel()
	hold, left := make(chan struct{}), make(chan struct{})
	p := newMockOpenAI(t, holding(hold, left))
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	ctx, cancel := context.WithCancel(context.Background())
	stream := tg.client(secret).Chat.Completions.NewStreaming(ctx, chatParams())
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
		if text.String() == "Hello from" {
			break
		}
	}
	require.Equal(t, "Hello from", text.String())
	cancel()
	stream.Close()
	select { // the client's leaving reaches the provider
	case <-left:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider's request was not cancelled after the client left")
	}
	close(hold)

	eventually(t, func() bool { return tg.keyUsage(t, keyID).TotalRequests == 1 }, "a cut-off stream is recorded")
	u := tg.keyUsage(t, keyID)
	assert.Positive(t, u.PromptTokens, "prompt tokens are estimated")
	assert.Positive(t, u.CompletionTokens, "the tokens produced are billed")
	assert.Positive(t, int64(u.TotalCostUSD))
	assert.Equal(t, 10*money.PerDollar-u.TotalCostUSD, tg.balance(t, "me@example.com"))
}
