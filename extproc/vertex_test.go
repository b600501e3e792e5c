package extproc

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

// TestAnAttemptWithoutAnAccessTokenFailsAsTheProviderFailing: a vertex
// deployment whose credential yields no token (here an unreadable
// credentials file) is answered 503 no_available_workers, marked
// translated, and counted as the deployment's failure — as a provider's
// 5xx is — so that the request fails over; no record is the upstream
// step's.
func TestAnAttemptWithoutAnAccessTokenFailsAsTheProviderFailing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.json")
	cfgText := strings.Replace(stepConfig, "models:\n",
		`  - {name: vertex, type: vertex, project: p1, region: us-east5, credentials_file: "`+missing+`"}
models:
  - id: gemini-vertex
    max_tokens: 100
    deployments: [{provider: vertex, model: gemini-2.5-flash}]
`, 1)
	g := newRig(t, func(g *rig) {
		cfg, err := config.Parse([]byte(cfgText), func(string) (string, bool) { return "", false })
		require.NoError(t, err)
		g.cfg = cfg
		g.opt.Config = func() *config.Config { return cfg }
	})
	body := `{"model":"gemini-vertex","messages":[{"role":"user","content":"hi"}]}`
	_, routed := g.admitted(contract.PathChatCompletions, body)
	dep := config.DeploymentID("gemini-vertex", "vertex", "gemini-2.5-flash")
	x, resp := g.attempt(routed, dep, body, 1)
	st, e := errorOf(t, resp)
	assert.Equal(t, 503, st)
	assert.Equal(t, "no_available_workers", e.Code)
	assert.Equal(t, "1", headerOf(resp.GetImmediateResponse().GetHeaders(), contract.HeaderTranslated))
	assert.Equal(t, []string{dep}, g.health.failures, "the deployment failed")
	finish(x)
	assert.Empty(t, g.usage.all(), "the router step records the failure")
}
