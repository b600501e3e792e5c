package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// liveConfig is a configuration with model "stay" on providers a and b at
// the given weights, and, when withNew, model "new" on b.
func liveConfig(a, b *mockProvider, weightA, weightB int, withNew bool) string {
	var s strings.Builder
	fmt.Fprintf(&s, `key_prefix: tg
providers:
  - {name: a, type: openai, base_url: "%s/v1", api_key: sk-openai-secret}
  - {name: b, type: openai, base_url: "%s/v1", api_key: sk-openai-secret}
models:
  - id: stay
    max_tokens: 8192
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments:
      - {provider: a, model: stay-a, weight: %d}
      - {provider: b, model: stay-b, weight: %d}
`, a.URL, b.URL, weightA, weightB)
	if withNew {
		s.WriteString(`  - id: new
    max_tokens: 8192
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments:
      - {provider: b, model: new-b}
`)
	}
	s.WriteString("plans:\n  - {name: pro, default_rpm: 0, models: [\"*\"]}\n")
	return s.String()
}

// steadyLoad sends requests for model "stay" from a few clients, about
// 25 a second in all, until stopped; it counts every answer by status.
type steadyLoad struct {
	stop  chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	codes map[int]int
	bad   []string // the first few non-200 answers
}

func startLoad(t *testing.T, tg *tollgate, secret string) *steadyLoad {
	l := &steadyLoad{stop: make(chan struct{}), codes: map[int]int{}}
	body := `{"model":"stay","messages":[{"role":"user","content":"hi"}]}`
	for range 4 {
		l.wg.Go(func() {
			tick := time.NewTicker(160 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				resp, b := tg.post(t, secret, body)
				l.mu.Lock()
				l.codes[resp.StatusCode]++
				if resp.StatusCode != http.StatusOK && len(l.bad) < 5 {
					l.bad = append(l.bad, fmt.Sprintf("%d %s", resp.StatusCode, b))
				}
				l.mu.Unlock()
			}
		})
	}
	t.Cleanup(l.end)
	return l
}

// end stops the load and waits for its clients (once).
func (l *steadyLoad) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// shiftedTo waits until, over a window of at least 10 requests, more than
// 90% of the load reached provider to.
func shiftedTo(t *testing.T, to, other *mockProvider, what string) {
	t.Helper()
	start := time.Now()
	toBefore, otherBefore := to.count(), other.count()
	waitFor(t, 8*time.Second, 250*time.Millisecond, func() bool {
		dt, do := to.count()-toBefore, other.count()-otherBefore
		if dt+do >= 10 && float64(dt) > 0.9*float64(dt+do) {
			return true
		}
		if dt+do >= 10 { // a window from before the change: start again
			toBefore, otherBefore = to.count(), other.count()
		}
		return false
	}, "%s: the traffic shifts", what)
	t.Logf("%s: the traffic shifted within %v", what, time.Since(start).Round(10*time.Millisecond))
}

// The configuration file edited while a steady load runs: a model added
// answers within seconds, re-weighted deployments shift the traffic, a
// removed model answers 400 invalid_model, and a bad edit keeps the
// running configuration and says why. Under Envoy every change travels
// over xDS to the running Envoy, which is never restarted. No request for
// the model that stays fails.
func TestLiveConfigurationUnderLoad(t *testing.T) {
	t.Parallel()
	a, b := newMockProvider(t, "openai"), newMockProvider(t, "openai")
	tg := startTollgate(t, liveConfig(a, b, 1, 1, false), "")
	secret := tg.newAccount(t, "me@example.com", "100")
	write := func(cfg string) {
		require.NoError(t, os.WriteFile(tg.Config, []byte(cfg), 0o600))
	}
	newModel := `{"model":"new","messages":[{"role":"user","content":"hi"}]}`
	resp, _ := tg.post(t, secret, newModel)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "model new is not configured yet")

	load := startLoad(t, tg, secret)
	waitFor(t, 10*time.Second, 20*time.Millisecond, func() bool { return a.count() > 0 && b.count() > 0 },
		"the load reaches a and b")

	start := time.Now()
	write(liveConfig(a, b, 1, 1, true))
	waitFor(t, 5*time.Second, 50*time.Millisecond, func() bool {
		resp, _ := tg.post(t, secret, newModel)
		return resp.StatusCode == http.StatusOK
	}, "the added model answers")
	t.Logf("the added model answered within %v", time.Since(start).Round(10*time.Millisecond))

	write(liveConfig(a, b, 1, 128, true))
	shiftedTo(t, b, a, "weights 1:128")
	write(liveConfig(a, b, 128, 1, true))
	shiftedTo(t, a, b, "weights 128:1")

	write(liveConfig(a, b, 128, 1, false))
	waitFor(t, 5*time.Second, 50*time.Millisecond, func() bool {
		resp, body := tg.post(t, secret, newModel)
		return resp.StatusCode == http.StatusBadRequest && decodeError(t, body).Error.Code == "invalid_model"
	}, "the removed model answers 400 invalid_model")

	// A bad edit: the running configuration stays, and the log says why.
	rejected := strings.Count(tg.logs.String(), "configuration change rejected")
	write(strings.Replace(liveConfig(a, b, 1, 1, false), "weight: 1}", "weight: 1000}", 1))
	waitFor(t, 5*time.Second, 50*time.Millisecond, func() bool {
		return strings.Count(tg.logs.String(), "configuration change rejected") > rejected
	}, "the bad edit is refused")
	assert.Regexp(t, `configuration change rejected.*weight`, tg.logs.String(), "the log names the bad field")
	aBefore, bBefore := a.count(), b.count()
	time.Sleep(time.Second)
	assert.Greater(t, a.count()-aBefore, 5*(b.count()-bBefore), "the last good weights (128:1) still hold")

	load.end()
	load.mu.Lock()
	defer load.mu.Unlock()
	assert.Equal(t, []string(nil), load.bad, "every request for the model that stays answered: %v", load.codes)
	assert.Greater(t, load.codes[http.StatusOK], 50, "the load ran")
}
