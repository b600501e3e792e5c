package extproc

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/mockllm"
)

// vertexRig is a rig whose configuration adds the vertex provider
// (project p1, region us-east5) with the given credentials file, and its
// models gemini-vertex (gemini-2.5-flash) and claude-vertex
// (claude-sonnet-4-5@20250929).
func vertexRig(t *testing.T, credentialsFile string) *rig {
	return rigAdding(t, `  - {name: vertex, type: vertex, project: p1, region: us-east5, credentials_file: "`+credentialsFile+`"}
models:
  - id: gemini-vertex
    max_tokens: 100
    deployments: [{provider: vertex, model: gemini-2.5-flash}]
  - id: claude-vertex
    max_tokens: 100
    input_price_per_million: 3
    output_price_per_million: 15
    deployments: [{provider: vertex, model: "claude-sonnet-4-5@20250929"}]
`)
}

// vertexGemini and vertexClaude are gemini-vertex's and claude-vertex's
// deployments.
var (
	vertexGemini = config.DeploymentID("gemini-vertex", "vertex", "gemini-2.5-flash")
	vertexClaude = config.DeploymentID("claude-vertex", "vertex", "claude-sonnet-4-5@20250929")
)

// mockTokenFile starts the mock's token endpoint for a service account and
// returns the path of that account's key file.
func mockTokenFile(t *testing.T) string {
	t.Helper()
	const sa = "tollgate@p1.iam.gserviceaccount.com"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	srv := httptest.NewServer(mockllm.New(mockllm.Options{VertexAccounts: map[string]*rsa.PublicKey{sa: &key.PublicKey}}))
	t.Cleanup(srv.Close)
	file, err := mockllm.ServiceAccountFile(sa, srv.URL+mockllm.VertexTokenPath, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(path, file, 0o600))
	return path
}

// TestAnAttemptWithoutAnAccessTokenFailsAsTheProviderFailing: a vertex
// deployment whose credential yields no token (here an unreadable
// credentials file) is answered 503 no_available_workers, marked
// translated and for failover, and counted as the deployment's failure, as a provider's
// 5xx is; the upstream step records nothing (the router step does).
func TestAnAttemptWithoutAnAccessTokenFailsAsTheProviderFailing(t *testing.T) {
	g := vertexRig(t, filepath.Join(t.TempDir(), "none.json"))
	body := `{"model":"gemini-vertex","messages":[{"role":"user","content":"hi"}]}`
	_, routed := g.admitted(contract.PathChatCompletions, body)
	x, resp := g.attempt(routed, vertexGemini, body, 1)
	st, e := errorOf(t, resp)
	assert.Equal(t, 503, st)
	assert.Equal(t, "no_available_workers", e.Code)
	assert.Equal(t, "1", headerOf(resp.GetImmediateResponse().GetHeaders(), contract.HeaderTranslated))
	assert.Equal(t, "1", headerOf(resp.GetImmediateResponse().GetHeaders(), contract.HeaderFailover), "the edge may try the next deployment")
	assert.Equal(t, []string{vertexGemini}, g.health.failures, "the deployment failed")
	finish(x)
	assert.Empty(t, g.usage.all(), "the router step records the failure")
}

// TestAMessagesRequestToGeminiOnVertexLeavesTheUserOut: metadata.user_id,
// which Claude Code always sends, becomes chat's user, which Gemini
// refuses; to a Gemini deployment on Vertex, as to the gemini type, it is
// left out, and the request goes to Vertex's path with Google's token.
func TestAMessagesRequestToGeminiOnVertexLeavesTheUserOut(t *testing.T) {
	g := vertexRig(t, mockTokenFile(t))

	const req = `{"model":"gemini-vertex","max_tokens":50,"metadata":{"user_id":"user_abc"},"messages":[{"role":"user","content":"hi"}]}`
	_, routed := g.admitted(contract.PathMessages, req)
	_, sent := g.messagesAttempt(routed, vertexGemini)
	require.Nil(t, sent.GetImmediateResponse(), "not refused: %s", sent.GetImmediateResponse().GetBody())
	assert.Equal(t, "/v1/projects/p1/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent", headerSet(sent, ":path"))
	assert.True(t, strings.HasPrefix(headerSet(sent, "authorization"), "Bearer ya29.mock-"), "the token the service account's JWT bought")
	assert.Equal(t, "hi", gjson.GetBytes(commonOf(sent).GetBodyMutation().GetBody(), "contents.0.parts.0.text").String())
}

// TestAMessagesRequestToClaudeOnVertexPassesThrough: a Messages request to
// Claude on Vertex is the client's body — thinking, cache_control, a
// server tool — in Vertex's shape (no model, anthropic_version in the
// body) on rawPredict, with Google's token and the client's
// anthropic-beta; the answer is Anthropic's own but the model, metered
// from its usage (input, cache reads and writes, output).
func TestAMessagesRequestToClaudeOnVertexPassesThrough(t *testing.T) {
	g := vertexRig(t, mockTokenFile(t))
	const req = `{"model":"claude-vertex","max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}]}`
	router, routed := g.admitted(contract.PathMessages, req)
	require.Nil(t, routed.GetImmediateResponse(), "a server tool is admitted for a model only Claude serves: %s", routed.GetImmediateResponse().GetBody())
	x, sent := g.messagesAttempt(routed, vertexClaude, "anthropic-version", "2023-06-01", "anthropic-beta", "interleaved-thinking-2025-05-14")
	require.Nil(t, sent.GetImmediateResponse(), "not refused: %s", sent.GetImmediateResponse().GetBody())
	assert.Equal(t, "/v1/projects/p1/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict", headerSet(sent, ":path"))
	assert.True(t, strings.HasPrefix(headerSet(sent, "authorization"), "Bearer ya29.mock-"), "the token the service account's JWT bought")
	assert.Equal(t, "interleaved-thinking-2025-05-14", headerSet(sent, "anthropic-beta"))
	assert.Empty(t, headerSet(sent, "anthropic-version"), "Vertex's version is in the body")
	want := `{"max_tokens":64,"thinking":{"type":"enabled","budget_tokens":32},"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral"}}]}],"anthropic_version":"vertex-2023-10-16"}`
	assert.Equal(t, want, string(commonOf(sent).GetBodyMutation().GetBody()), "the client's body, without its model, with Vertex's version")

	const answer = `{"id":"msg_vrtx_01","type":"message","role":"assistant","model":"claude-sonnet-4-5@20250929","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"text","text":"Hello."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"cache_read_input_tokens":20,"cache_creation_input_tokens":5,"output_tokens":7}}`
	out := g.answer(x, "200", false, answer)
	finish(x)
	g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
	finish(router)
	assert.Equal(t, strings.Replace(answer, `"model":"claude-sonnet-4-5@20250929"`, `"model":"claude-vertex"`, 1), string(bodyOf(out[len(out)-1])),
		"Anthropic's answer, thinking and signature included, but the model")
	recs := g.usage.all()
	require.Len(t, recs, 1)
	assert.EqualValues(t, 35, recs[0].PromptTokens, "input with cache reads and writes")
	assert.EqualValues(t, 20, recs[0].CachedTokens)
	assert.EqualValues(t, 5, recs[0].CacheWriteTokens)
	assert.EqualValues(t, 7, recs[0].CompletionTokens)
	assert.False(t, recs[0].Estimated)
}
