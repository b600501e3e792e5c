package dashboard

import (
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/internal/heappeak"
)

// A spray of sign-ins on distinct emails cannot exhaust memory: at most
// MaxConcurrentHashes password hashes (19 MiB each) run at once, so the
// heap's peak stays a few hashes above where it started, whatever the
// number of attempts in flight.
func TestASignInSprayKeepsTheHeapFlat(t *testing.T) {
	withOWASPCost(t)
	e := newEnv(t)
	const attempts = 24
	statuses := make([]int, attempts)
	grew := heappeak.Growth(func() {
		var wg sync.WaitGroup
		for i := range attempts {
			wg.Go(func() {
				statuses[i] = e.anonymous().post("/login", login(fmt.Sprintf("nobody%d@example.com", i), password)).Code
			})
		}
		wg.Wait()
	})

	// Unbounded, the attempts would hold 24 hashes at once (456 MiB). Bounded,
	// two run at once; the rest of the bound is garbage the collector has
	// not yet taken back (its pacing lets the heap reach about twice what is
	// live), which a loaded machine stretches: eight hashes in all.
	const hash = 19 << 20
	assert.Less(t, grew, int64(8*hash), "the heap grew by %d MiB for %d concurrent sign-ins", grew>>20, attempts)
	for i, st := range statuses {
		assert.Contains(t, []int{http.StatusOK, http.StatusServiceUnavailable}, st, "attempt %d: a wrong password, or try again", i)
	}
}

func TestSignInsAreLimitedPerAddress(t *testing.T) {
	e := newEnv(t)
	b := e.anonymous()
	for i := range loginAttemptsPerAddressMinute {
		w := b.post("/login", login(fmt.Sprintf("a%d@example.com", i), "wrong password"))
		assert.Equal(t, http.StatusOK, w.Code, "attempt %d", i)
	}
	w := b.post("/login", login("another@example.com", "wrong password"))
	assert.Equal(t, http.StatusTooManyRequests, w.Code, "one address, many emails: limited")
	assert.Contains(t, w.Body.String(), msgTooManyLogins)

	e.clock.Advance(time.Minute)
	assert.Equal(t, http.StatusOK, b.post("/login", login("again@example.com", "wrong password")).Code, "a new minute")
}

func TestASignInWithNoFreeHashSlotIsAskedToRetry(t *testing.T) {
	e := newEnv(t)
	for range cap(e.d.hashSlots) {
		e.d.hashSlots <- struct{}{}
	}
	w := e.anonymous().post("/login", login("me@example.com", password))
	assert.Equal(t, http.StatusServiceUnavailable, w.Code)
	assert.Contains(t, w.Body.String(), msgBusy)
	for range cap(e.d.hashSlots) {
		<-e.d.hashSlots
	}
	assert.Equal(t, http.StatusOK, e.anonymous().post("/login", login("me@example.com", password)).Code, "a slot is free again")
}

// Behind a proxy (one trusted hop), two clients are told apart by the
// address the proxy appended to X-Forwarded-For, not by the proxy's own;
// what a client writes to the left of it cannot move it to a fresh counter.
func TestSignInsBehindAProxyAreLimitedPerClient(t *testing.T) {
	e := newEnv(t)
	e.d.xffHops = 1
	from := func(xff string, i int) int {
		return e.anonymous().postWith("/login", login(fmt.Sprintf("a%d@example.com", i), "wrong password"),
			http.Header{"X-Forwarded-For": {xff}}).Code
	}
	for i := range loginAttemptsPerAddressMinute {
		assert.Equal(t, http.StatusOK, from("203.0.113.1", i), "client A, attempt %d", i)
	}
	assert.Equal(t, http.StatusTooManyRequests, from("203.0.113.1", 99), "client A is limited")
	assert.Equal(t, http.StatusOK, from("203.0.113.2", 99), "client B, behind the same proxy, is not")
	for i := range 5 {
		forged := fmt.Sprintf("198.51.100.%d, 203.0.113.1", i)
		assert.Equal(t, http.StatusTooManyRequests, from(forged, i), "client A with a forged entry %q", forged)
	}
}
