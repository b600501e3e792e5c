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
// model gemini-vertex (gemini-2.5-flash).
func vertexRig(t *testing.T, credentialsFile string) *rig {
	cfgText := strings.Replace(stepConfig, "models:\n",
		`  - {name: vertex, type: vertex, project: p1, region: us-east5, credentials_file: "`+credentialsFile+`"}
models:
  - id: gemini-vertex
    max_tokens: 100
    deployments: [{provider: vertex, model: gemini-2.5-flash}]
`, 1)
	return newRig(t, func(g *rig) {
		cfg, err := config.Parse([]byte(cfgText), func(string) (string, bool) { return "", false })
		require.NoError(t, err)
		g.cfg = cfg
		g.opt.Config = func() *config.Config { return cfg }
	})
}

// vertexGemini is gemini-vertex's deployment.
var vertexGemini = config.DeploymentID("gemini-vertex", "vertex", "gemini-2.5-flash")

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
	const sa = "tollgate@p1.iam.gserviceaccount.com"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	srv := httptest.NewServer(mockllm.New(mockllm.Options{VertexAccounts: map[string]*rsa.PublicKey{sa: &key.PublicKey}}))
	t.Cleanup(srv.Close)
	file, err := mockllm.ServiceAccountFile(sa, srv.URL+mockllm.VertexTokenPath, key)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(path, file, 0o600))
	g := vertexRig(t, path)

	const req = `{"model":"gemini-vertex","max_tokens":50,"metadata":{"user_id":"user_abc"},"messages":[{"role":"user","content":"hi"}]}`
	_, routed := g.admitted(contract.PathMessages, req)
	_, sent := g.messagesAttempt(routed, vertexGemini)
	require.Nil(t, sent.GetImmediateResponse(), "not refused: %s", sent.GetImmediateResponse().GetBody())
	assert.Equal(t, "/v1/projects/p1/locations/us-east5/publishers/google/models/gemini-2.5-flash:generateContent", headerSet(sent, ":path"))
	assert.True(t, strings.HasPrefix(headerSet(sent, "authorization"), "Bearer ya29.mock-"), "the token the service account's JWT bought")
	assert.Equal(t, "hi", gjson.GetBytes(commonOf(sent).GetBodyMutation().GetBody(), "contents.0.parts.0.text").String())
}
