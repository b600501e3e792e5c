package e2e

import (
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Editing the configuration file changes a running server: a model added
// to the file is served without a restart, and a broken file is refused
// while the running configuration keeps serving.
func TestConfigChangesApplyWithoutRestart(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	cfg := configFor(p.URL)
	tg := startTollgate(t, cfg, "")
	secret := tg.newAccount(t, "me@example.com", "10")
	newModel := strings.Replace(helloBody, "gpt-4o-mini", "gpt-4o", 1)
	resp, _ := tg.post(t, secret, newModel)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "gpt-4o is not configured yet")

	added := strings.Replace(cfg, "plans:\n", `  - id: gpt-4o
    max_tokens: 16384
    deployments:
      - provider: openai
        model: gpt-4o
plans:
`, 1)
	require.NoError(t, os.WriteFile(tg.Config, []byte(added), 0o600))
	eventually(t, func() bool {
		resp, _ := tg.post(t, secret, newModel)
		return resp.StatusCode == http.StatusOK
	}, "the added model is served")

	require.NoError(t, os.WriteFile(tg.Config, []byte("providers: [oops"), 0o600))
	eventually(t, func() bool { return strings.Contains(tg.logs.String(), "configuration change rejected") }, "the broken file is refused")
	resp, b := tg.post(t, secret, newModel)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the running configuration keeps serving: %s", b)
}

// A reload that reorders a model's deployments while requests run never
// sends one provider's credential to another's host: deployment identities
// are the provider and its model, not positions. Each mock provider notes
// any request that lacks its own credential or carries another's.
func TestReorderingDeploymentsUnderLoadNeverCrossesCredentials(t *testing.T) {
	t.Parallel()
	oa, an := newMockProvider(t, "openai"), newMockProvider(t, "anthropic")
	cfg := failoverConfig(map[string][]upstream{"m": {oa.upstream(), an.upstream()}})
	lines := strings.Split(cfg, "\n")
	var first, second int
	for i, l := range lines {
		switch {
		case strings.Contains(l, "{provider: p0,"):
			first = i
		case strings.Contains(l, "{provider: p1,"):
			second = i
		}
	}
	require.NotZero(t, first)
	require.NotZero(t, second)
	// Both at one priority, so both take traffic; then the same two in the
	// other order.
	lines[second] = strings.Replace(lines[second], "priority: 1", "priority: 0", 1)
	inOrder := strings.Join(lines, "\n")
	lines[first], lines[second] = lines[second], lines[first]
	swapped := strings.Join(lines, "\n")
	require.NotEqual(t, inOrder, swapped)

	tg := startTollgate(t, inOrder, "")
	secret := tg.newAccount(t, "me@example.com", "10")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failures atomic.Int32
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if resp, _ := tg.post(t, secret, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != http.StatusOK {
					failures.Add(1)
				}
			}
		})
	}
	for i := range 10 {
		next := swapped
		if i%2 == 1 {
			next = inOrder
		}
		want := strings.Count(tg.logs.String(), "configuration applied") + 1
		require.NoError(t, os.WriteFile(tg.Config, []byte(next), 0o600))
		eventually(t, func() bool { return strings.Count(tg.logs.String(), "configuration applied") >= want }, "reload %d applied", i)
	}
	close(stop)
	wg.Wait()
	assert.Empty(t, oa.issues(), "the OpenAI mock saw no foreign or missing credential")
	assert.Empty(t, an.issues(), "the Anthropic mock saw no foreign or missing credential")
	assert.Positive(t, oa.count())
	assert.Positive(t, an.count())
	assert.Zero(t, failures.Load(), "every request was answered")
}
