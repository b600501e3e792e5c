package e2e

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/money"
)

// closedURL is an http:// address nothing listens on: connections to it
// are refused.
func closedURL(t *testing.T) string {
	t.Helper()
	return "http://" + testenv.RefusingAddr(t)
}

// upstream is one deployment of a model in failoverConfig: a provider
// kind, and the base address of its server (a mock's, or a closed port).
type upstream struct {
	kind string
	url  string
}

func (m *mockProvider) upstream() upstream { return upstream{m.kind, m.URL} }

// failoverConfig defines one provider per deployment (named p0, p1, …, with
// the credentials the mocks expect) and the given models, each served by
// its deployments in priority order, plus a plan for every model.
func failoverConfig(models map[string][]upstream) string {
	var providers, modelsYAML strings.Builder
	n := 0
	for _, id := range slices.Sorted(maps.Keys(models)) {
		deps := models[id]
		fmt.Fprintf(&modelsYAML, "  - id: %s\n    max_tokens: 8192\n    input_price_per_million: 0.15\n    output_price_per_million: 0.60\n    deployments:\n", id)
		for prio, d := range deps {
			name := fmt.Sprintf("p%d", n)
			n++
			base, model := d.url, "some-model"
			switch d.kind {
			case "openai":
				base += "/v1"
			case "azure":
				model = azureDeployment
			case "anthropic":
				model = "claude-sonnet-4-5"
			case "gemini":
				model = geminiModel
			}
			secret := strings.TrimPrefix(mockCredentials[d.kind][1], "Bearer ")
			extra := ""
			if d.kind == "azure" {
				extra = ", api_version: \"" + azureVersion + "\""
			}
			fmt.Fprintf(&providers, "  - {name: %s, type: %s, base_url: \"%s\", api_key: %s%s}\n", name, d.kind, base, secret, extra)
			fmt.Fprintf(&modelsYAML, "      - {provider: %s, model: \"%s\", priority: %d}\n", name, model, prio)
		}
	}
	return "key_prefix: tg\nproviders:\n" + providers.String() + "models:\n" + modelsYAML.String() +
		"plans:\n  - {name: pro, default_rpm: 0, models: [\"*\"]}\n"
}

func TestFailoverAnswersFromTheNextPriorityWithoutItsPredecessorsCredential(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		first  func(t *testing.T) upstream // priority 0, failing
		second string                      // priority 1, healthy
	}{
		{"anthropic answers 503, then openai", func(t *testing.T) upstream {
			m := newMockProvider(t, "anthropic")
			m.setStatus(http.StatusServiceUnavailable)
			return m.upstream()
		}, "openai"},
		{"openai answers 500, then anthropic", func(t *testing.T) upstream {
			m := newMockProvider(t, "openai")
			m.setStatus(http.StatusInternalServerError)
			return m.upstream()
		}, "anthropic"},
		{"gemini refuses connections, then azure", func(t *testing.T) upstream {
			return upstream{"gemini", closedURL(t)}
		}, "azure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			healthy := newMockProvider(t, tt.second)
			tg := startTollgate(t, failoverConfig(map[string][]upstream{
				"fallback-model": {tt.first(t), healthy.upstream()},
			}), "")
			secret := tg.newAccount(t, "me@example.com", "10")
			keyID := tg.onlyKeyID(t, "me@example.com")
			client := tg.client(secret)

			resp, err := client.Chat.Completions.New(context.Background(), paramsFor("fallback-model"))
			require.NoError(t, err)
			assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
			got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor("fallback-model")))
			assert.Equal(t, mockFullText(), got.text)
			assert.Equal(t, "stop", got.finish)

			prompt, completion := mockUsage[tt.second][0], mockUsage[tt.second][1]
			want := usageRecord{Model: "fallback-model", Provider: "p1", PromptTokens: prompt, Completion: completion,
				Cost: costOf(prompt, completion), Status: 200}
			assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2),
				"one record per request, from the deployment that answered")
			assert.Equal(t, 10*money.PerDollar-2*want.Cost, tg.balance(t, "me@example.com"))

			require.Len(t, healthy.received(), 2)
			assert.Empty(t, healthy.issues(),
				"the second provider gets its own credential and none of the first's (the edge shares the header map across attempts, as Envoy does)")
		})
	}
}

func TestEveryDeploymentFailingAnswers503NoAvailableWorkers(t *testing.T) {
	t.Parallel()
	overloaded := newMockProvider(t, "anthropic")
	overloaded.setStatus(529) // Anthropic's "overloaded"
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"doomed": {overloaded.upstream(), {"openai", closedURL(t)}},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")
	client := tg.client(secret)

	_, err := client.Chat.Completions.New(context.Background(), paramsFor("doomed"))
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "%v", err)
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	assert.Equal(t, "no_available_workers", apiErr.Code)
	assert.Equal(t, "service_unavailable", apiErr.Type)

	stream := client.Chat.Completions.NewStreaming(context.Background(), paramsFor("doomed"))
	assert.False(t, stream.Next())
	require.True(t, errors.As(stream.Err(), &apiErr), "%v", stream.Err())
	assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
	assert.Equal(t, "no_available_workers", apiErr.Code)

	assert.Equal(t, 2, overloaded.count(), "each request tried the first deployment once")
	for _, r := range tg.waitRecords(t, keyID, 2) {
		assert.Equal(t, usageRecord{Model: "doomed", Status: 503, ErrorCode: "no_available_workers"}, r,
			"the failure is recorded once per request, at no cost")
	}
	assert.Equal(t, 10*money.PerDollar, tg.balance(t, "me@example.com"))
}

// threshold is how many consecutive failures open a circuit in the edge's
// default health tracker (health.DefaultFailureThreshold).
const threshold = 3

func TestAnOpenCircuitAnswers503WithoutCallingTheDeadProvider(t *testing.T) {
	// Not in parallel with the suite: it holds a time to a bound (a
	// second or two) that a machine busy with every other test cannot keep.
	dead := newMockProvider(t, "openai")
	dead.setStatus(http.StatusInternalServerError)
	alive := newMockProvider(t, "gemini")
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"dead-model":  {dead.upstream()},
		"alive-model": {alive.upstream()},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	client := tg.client(secret)

	for i := range threshold {
		_, err := client.Chat.Completions.New(context.Background(), paramsFor("dead-model"))
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "request %d: %v", i, err)
		assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode, "the provider's 500 fails the request as 503")
	}
	require.Equal(t, threshold, dead.count())

	for i := range 3 {
		start := time.Now()
		_, err := client.Chat.Completions.New(context.Background(), paramsFor("dead-model"))
		elapsed := time.Since(start)
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "%v", err)
		assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
		assert.Equal(t, "no_available_workers", apiErr.Code)
		assert.Less(t, elapsed, 2*time.Second, "request %d is answered at once", i)
	}
	assert.Equal(t, threshold, dead.count(), "the dead provider sees no request while its circuit is open")

	_, err := client.Chat.Completions.New(context.Background(), paramsFor("alive-model"))
	require.NoError(t, err, "other models are not affected")
}

func TestAnOpenCircuitSendsRequestsStraightToTheNextPriority(t *testing.T) {
	t.Parallel()
	dead := newMockProvider(t, "openai")
	dead.setStatus(http.StatusBadGateway)
	backup := newMockProvider(t, "anthropic")
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"m": {dead.upstream(), backup.upstream()},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	client := tg.client(secret)

	for range threshold + 2 {
		resp, err := client.Chat.Completions.New(context.Background(), paramsFor("m"))
		require.NoError(t, err)
		assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
	}
	assert.Equal(t, threshold, dead.count(), "after the circuit opened, the dead deployment is skipped")
	assert.Equal(t, threshold+2, backup.count())
	assert.Empty(t, backup.issues())
}

func TestAProviderErrorMidStreamEndsTheSDKStreamWithAnError(t *testing.T) {
	t.Parallel()
	p := newMockProvider(t, "anthropic", failingMidStream)
	tg := startTollgate(t, failoverConfig(map[string][]upstream{"claude": {p.upstream()}}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	stream := tg.client(secret).Chat.Completions.NewStreaming(context.Background(), paramsFor("claude"))
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	assert.Equal(t, "Hello from", text.String(), "the text before the error reaches the client")
	var streamErr *ssestream.StreamError
	require.True(t, errors.As(stream.Err(), &streamErr), "the SDK reports the error event: %v", stream.Err())
	assert.Contains(t, streamErr.Message, "Overloaded")
	assert.Contains(t, string(streamErr.Event.Data), `"code":"upstream_error"`)

	recs := tg.waitRecords(t, keyID, 1)
	r := recs[0]
	assert.Equal(t, "claude", r.Model)
	assert.Equal(t, "p0", r.Provider)
	assert.Equal(t, 502, r.Status, "the provider broke off an answer that had begun")
	assert.Equal(t, "upstream_error", r.ErrorCode)
	assert.Equal(t, 25, int(r.PromptTokens), "the prompt count the provider reported at the start is kept")
	assert.Positive(t, r.Completion, "the text produced so far is billed")
	assert.Equal(t, costOf(r.PromptTokens, r.Completion), r.Cost)
	assert.Equal(t, 10*money.PerDollar-r.Cost, tg.balance(t, "me@example.com"), "the balance fell by exactly the cost")
}

// A Responses request and a Messages request fail over like a chat
// completion: behind Envoy each goes on by its model's route (its
// timeouts and retries), not by the route of its path, which has none.
func TestResponsesAndMessagesFailOverToTheNextPriority(t *testing.T) {
	t.Parallel()
	failing := newMockProvider(t, "openai")
	failing.setStatus(http.StatusInternalServerError)
	healthy := newMockProvider(t, "openai")
	tg := startTollgate(t, failoverConfig(map[string][]upstream{
		"fallback-model": {failing.upstream(), healthy.upstream()},
	}), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	resp, b := tg.do(t, http.MethodPost, "/responses", secret, `{"model":"fallback-model","input":"hi","store":false}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, "completed", gjson.GetBytes(b, "status").String(), string(b))
	resp, b = tg.message(t, secret, `{"model":"fallback-model","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(b))
	assert.Equal(t, "message", gjson.GetBytes(b, "type").String(), string(b))
	for _, r := range tg.waitRecords(t, keyID, 2) {
		assert.Equal(t, "p1", r.Provider, "the deployment that answered")
		assert.Equal(t, 200, r.Status)
	}
	assert.Equal(t, 2, failing.count(), "each request tried the failing deployment first")
}
