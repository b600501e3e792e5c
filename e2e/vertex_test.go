package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/health"
	"github.com/tollgate/tollgate/internal/mockllm"
	"github.com/tollgate/tollgate/money"
)

// vertexAccount is the service account the Vertex mocks know.
const vertexAccount = "tollgate@my-project.iam.gserviceaccount.com"

// newMockVertex is Vertex AI: its Gemini and Claude paths, behind the
// mock's OAuth2 token endpoint, which issues tokens for JWTs key signs;
// every answer is mockText with 25 prompt and 12 completion tokens as
// Tollgate counts them.
func newMockVertex(t *testing.T, key *rsa.PublicKey) *mockProvider {
	t.Helper()
	return startMock(t, "vertex", mockllm.Options{
		VertexAccounts: map[string]*rsa.PublicKey{vertexAccount: key},
		Answer:         mockText, Usage: &mockllm.Usage{Prompt: 25, Completion: 12},
	}, nil)
}

// serviceAccountFile writes the service account's key file, whose
// token_uri is the mock's token endpoint, and returns its path.
func serviceAccountFile(t *testing.T, key *rsa.PrivateKey, mock *mockProvider) string {
	t.Helper()
	b, err := mockllm.ServiceAccountFile(vertexAccount, mock.URL+mockllm.VertexTokenPath, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "service-account.json")
	require.NoError(t, os.WriteFile(path, b, 0o600))
	return path
}

// TestVertexServesGeminiAndClaudeWithGooglesCredentials: a vertex
// provider answers a Gemini model and a Claude model, whole and streamed,
// with the access token its service account's JWT buys at the token
// endpoint, billed exactly; a Messages request to the Claude model passes
// through to rawPredict, its answer Anthropic's own; a provider whose key the token endpoint does
// not know fails loudly — 503 no_available_workers, no request reaches
// Vertex, nothing is billed — and counts against its deployment; the
// built-in edge then tries the model's other deployment, which answers, and
// behind Envoy, once the failures opened the deployment's circuit, Envoy
// holds its endpoint unhealthy and sends the requests to the other.
func TestVertexServesGeminiAndClaudeWithGooglesCredentials(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	vertex, wrong := newMockVertex(t, &key.PublicKey), newMockVertex(t, &key.PublicKey)
	cfg := fmt.Sprintf(`key_prefix: tg
providers:
  - {name: vertex, type: vertex, project: my-project, region: us-east5, base_url: "%s", credentials_file: "%s"}
  - {name: vertex-wrong, type: vertex, project: my-project, location: global, base_url: "%s", credentials_file: "%s"}
models:
  - {id: gemini-vertex, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: vertex, model: %s}]}
  - {id: claude-vertex, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: vertex, model: "claude-sonnet-4-5@20250929"}]}
  - {id: claude-wrong, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: vertex-wrong, model: "claude-sonnet-4-5@20250929"}]}
  - {id: embed-vertex, kind: embedding, input_price_per_million: 0.15, deployments: [{provider: vertex, model: text-embedding-005}]}
  - {id: claude-failover, max_tokens: 8192, input_price_per_million: 0.15, output_price_per_million: 0.60,
     deployments: [{provider: vertex-wrong, model: "claude-sonnet-4-5@20250929", priority: 0},
                   {provider: vertex, model: "claude-sonnet-4-5@20250929", priority: 1}]}
plans:
  - {name: pro, default_rpm: 0, models: ["*"]}
`, vertex.URL, serviceAccountFile(t, key, vertex), wrong.URL, serviceAccountFile(t, stranger, wrong), geminiModel)
	tg := startTollgate(t, cfg, "")

	cost := costOf(25, 12)
	for _, tt := range []struct{ model, path, streamPath string }{
		{"gemini-vertex",
			"/v1/projects/my-project/locations/us-east5/publishers/google/models/" + geminiModel + ":generateContent",
			"/v1/projects/my-project/locations/us-east5/publishers/google/models/" + geminiModel + ":streamGenerateContent"},
		{"claude-vertex",
			"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			"/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict"},
	} {
		t.Run(tt.model, func(t *testing.T) {
			email := tt.model + "@example.com"
			secret := tg.newAccount(t, email, "10")
			keyID := tg.onlyKeyID(t, email)
			client := tg.client(secret)
			want := usageRecord{Model: tt.model, Provider: "vertex", PromptTokens: 25, Completion: 12, Cost: cost, Status: 200}

			resp, err := client.Chat.Completions.New(context.Background(), paramsFor(tt.model))
			require.NoError(t, err)
			require.Len(t, resp.Choices, 1)
			assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
			assert.Equal(t, "stop", string(resp.Choices[0].FinishReason))
			assert.Equal(t, int64(25), resp.Usage.PromptTokens)
			assert.Equal(t, int64(12), resp.Usage.CompletionTokens)
			assert.Equal(t, []usageRecord{want}, tg.waitRecords(t, keyID, 1))
			assert.Equal(t, 10*money.PerDollar-cost, tg.balance(t, email), "the balance fell by exactly the cost")

			got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor(tt.model)))
			assert.Equal(t, mockFullText(), got.text)
			assert.Equal(t, "stop", got.finish)
			assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2))
			assert.Equal(t, 10*money.PerDollar-2*cost, tg.balance(t, email))

			var paths []string
			for _, r := range vertex.received() {
				if r.Body != nil && (r.Path == tt.path || r.Path == tt.streamPath) {
					paths = append(paths, r.Path)
				}
			}
			assert.Equal(t, []string{tt.path, tt.streamPath}, paths, "each family on its publisher's path")
		})
	}

	t.Run("claude-vertex through the Messages API", func(t *testing.T) {
		email := "claude-vertex-messages@example.com"
		secret := tg.newAccount(t, email, "10")
		keyID := tg.onlyKeyID(t, email)
		body := `{"model":"claude-vertex","max_tokens":200,"top_k":5,"thinking":{"type":"enabled","budget_tokens":100},` +
			`"messages":[{"role":"user","content":[{"type":"text","text":"Weather in Paris?","cache_control":{"type":"ephemeral"}}]}]}`
		st, answer, _ := postMessages(t, tg, secret, "/messages", body)
		require.Equal(t, http.StatusOK, st, answer)
		assert.Equal(t, "claude-vertex", gjson.Get(answer, "model").String(), "the model asked")
		assert.Equal(t, "thinking", gjson.Get(answer, "content.0.type").String(), "Claude's thinking reaches the client: %s", answer)
		assert.Equal(t, mockFullText(), gjson.Get(answer, `content.#(type=="text").text`).String(), answer)
		assert.EqualValues(t, 5, gjson.Get(answer, "usage.cache_read_input_tokens").Int(), "Anthropic's own usage: %s", answer)
		st, stream, _ := postMessages(t, tg, secret, "/messages", strings.Replace(body, "{", `{"stream":true,`, 1))
		require.Equal(t, http.StatusOK, st, stream)
		names := sseNames(stream)
		require.NotEmpty(t, names, stream)
		assert.Equal(t, []string{"message_delta", "message_stop"}, names[len(names)-2:], stream)
		want := usageRecord{Model: "claude-vertex", Provider: "vertex", PromptTokens: 25, Completion: 12, Cost: cost, Status: 200}
		assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2), "input, cache reads and output, billed exactly")
		assert.Equal(t, 10*money.PerDollar-2*cost, tg.balance(t, email))

		base := "/v1/projects/my-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929"
		var passed []string
		for _, r := range vertex.received() {
			if r.Body["thinking"] != nil {
				assert.EqualValues(t, 5, r.Body["top_k"], "the client's body as it is")
				passed = append(passed, r.Path)
			}
		}
		assert.Equal(t, []string{base + ":rawPredict", base + ":streamRawPredict"}, passed, "the client's body passed through, on rawPredict")
	})
	t.Run("embed-vertex", func(t *testing.T) {
		email := "embed-vertex@example.com"
		secret := tg.newAccount(t, email, "10")
		keyID := tg.onlyKeyID(t, email)
		resp, body := tg.do(t, http.MethodPost, "/embeddings", secret, `{"model":"embed-vertex","input":["The food was delicious","Paris"],"dimensions":8}`)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
		assert.Equal(t, "embed-vertex", gjson.GetBytes(body, "model").Str)
		require.EqualValues(t, 2, gjson.GetBytes(body, "data.#").Int(), "%s", body)
		got := gjson.GetBytes(body, "data.1.embedding").Array()
		require.Len(t, got, 8)
		assert.InDelta(t, mockllm.Embedding("Paris", 8)[0], got[0].Float(), 1e-6)
		assert.EqualValues(t, 25, gjson.GetBytes(body, "usage.prompt_tokens").Int(), "the predictions' token counts")
		want := usageRecord{Model: "embed-vertex", Provider: "vertex", PromptTokens: 25, Cost: costOf(25, 0), Status: 200}
		assert.Equal(t, []usageRecord{want}, tg.waitRecords(t, keyID, 1), "billed exactly")
		assert.Equal(t, 10*money.PerDollar-costOf(25, 0), tg.balance(t, email))
	})
	assert.Empty(t, vertex.issues(), "a token the mock issued on every request, each body as Vertex wants it")

	secret := tg.newAccount(t, "wrong@example.com", "10")
	keyID := tg.onlyKeyID(t, "wrong@example.com")
	for _, stream := range []bool{false, true} {
		var err error
		if stream {
			s := tg.client(secret).Chat.Completions.NewStreaming(context.Background(), paramsFor("claude-wrong"))
			for s.Next() {
				t.Errorf("a chunk reached the client: %s", s.Current().RawJSON())
			}
			err = s.Err()
		} else {
			_, err = tg.client(secret).Chat.Completions.New(context.Background(), paramsFor("claude-wrong"))
		}
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "stream %t: the client gets an error: %v", stream, err)
		assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode)
		assert.Equal(t, "no_available_workers", apiErr.Code)
	}
	assert.Empty(t, wrong.received(), "no request reached Vertex without a token")
	assert.NotEmpty(t, wrong.Problems(), "the token endpoint refused the stranger's JWT")
	assert.Equal(t, 10*money.PerDollar, tg.balance(t, "wrong@example.com"), "nothing billed")
	for _, r := range tg.usageRecords(t, keyID) {
		assert.Zero(t, r.Cost, "a failed attempt costs nothing: %+v", r)
	}

	// An attempt without a token fails its deployment as a provider's 5xx
	// does: the built-in edge tries the model's next deployment, which
	// answers, and the record names it. Envoy 1.40 cannot retry it (an
	// upstream filter's own reply goes to the client past the router's
	// retry policy): there the client gets 503 until the failures open the
	// deployment's circuit, which Tollgate then serves Envoy as an
	// UNHEALTHY endpoint.
	email := "failover@example.com"
	secret = tg.newAccount(t, email, "10")
	keyID = tg.onlyKeyID(t, email)
	client := tg.client(secret)
	want := usageRecord{Model: "claude-failover", Provider: "vertex", PromptTokens: 25, Completion: 12, Cost: cost, Status: 200}
	if binding() == bindingEnvoy {
		envoyFailsOverOnceTheCircuitOpens(t, tg, client, keyID, want, wrong)
		assert.Equal(t, 10*money.PerDollar-3*cost, tg.balance(t, email), "billed once for each answer, exactly")
		return
	}
	resp, err := client.Chat.Completions.New(context.Background(), paramsFor("claude-failover"))
	require.NoError(t, err, "the deployment with a token answers in place of the one without")
	assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content)
	got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor("claude-failover")))
	assert.Equal(t, mockFullText(), got.text, "streamed too")
	assert.Equal(t, []usageRecord{want, want}, tg.waitRecords(t, keyID, 2), "each request recorded once, on the deployment that answered")
	assert.Equal(t, 10*money.PerDollar-2*cost, tg.balance(t, email), "billed once each, exactly")
	assert.Empty(t, wrong.received())
}

// envoyFailsOverOnceTheCircuitOpens plays claude-failover behind Envoy:
// the deployment without a token fails each request (503, nothing billed)
// until its circuit opens; Envoy then holds its endpoint unhealthy and the
// requests go to the next priority, which answers (want); when the
// circuit half-opens Envoy sends the deployment its probe, whose failure
// opens the circuit again, and the next request is answered again.
func envoyFailsOverOnceTheCircuitOpens(t *testing.T, tg *tollgate, client *openai.Client, keyID string, want usageRecord, wrong *mockProvider) {
	t.Helper()
	cluster, broken := contract.ClusterName("claude-failover"), strings.TrimPrefix(wrong.URL, "http://")
	fails := func(why string) {
		t.Helper()
		_, err := client.Chat.Completions.New(context.Background(), paramsFor("claude-failover"))
		var apiErr *openai.Error
		require.True(t, errors.As(err, &apiErr), "%s: %v", why, err)
		assert.Equal(t, http.StatusServiceUnavailable, apiErr.StatusCode, why)
		assert.Equal(t, "no_available_workers", apiErr.Code, why)
		assert.Empty(t, apiErr.Response.Header.Get("x-tollgate-failover"), "an internal header")
	}
	answers := func(why string) {
		t.Helper()
		resp, err := client.Chat.Completions.New(context.Background(), paramsFor("claude-failover"))
		require.NoError(t, err, why)
		assert.Equal(t, mockFullText(), resp.Choices[0].Message.Content, why)
	}

	assert.Equal(t, "healthy", tg.envoy.hostHealth(t, cluster, broken))
	for i := range health.DefaultFailureThreshold {
		fails(fmt.Sprintf("attempt %d, circuit closed", i))
	}
	tg.envoy.waitHostHealth(t, cluster, broken, false)
	answers("the circuit is open: the next priority answers")
	got := readStream(t, client.Chat.Completions.NewStreaming(context.Background(), paramsFor("claude-failover")))
	assert.Equal(t, mockFullText(), got.text, "streamed too")
	records := tg.waitRecords(t, keyID, health.DefaultFailureThreshold+2)
	assert.Equal(t, []usageRecord{want, want}, records[health.DefaultFailureThreshold:],
		"each answer recorded once, on the deployment that answered; the broken one had no attempt")
	for _, r := range records[:health.DefaultFailureThreshold] {
		assert.Equal(t, http.StatusServiceUnavailable, r.Status, "%+v", r)
		assert.Zero(t, r.Cost, "%+v", r)
	}

	circuitsOf(t).advance(health.DefaultCooldown)
	tg.envoy.waitHostHealth(t, cluster, broken, true)
	fails("half-open: the request is the broken deployment's probe")
	tg.envoy.waitHostHealth(t, cluster, broken, false)
	answers("the failed probe opened the circuit again")
	records = tg.waitRecords(t, keyID, health.DefaultFailureThreshold+4)
	assert.Equal(t, http.StatusServiceUnavailable, records[health.DefaultFailureThreshold+2].Status)
	assert.Equal(t, want, records[health.DefaultFailureThreshold+3])
	assert.Empty(t, wrong.received(), "no request reached Vertex without a token")
}
