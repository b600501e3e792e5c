package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

// TestBehindEnvoyAStreamBrokenAfterItBeganResetsTheClient is what Envoy
// does where the built-in edge ends a broken stream with an error event
// and a 502 record (TestBrokenStreamsEndWithOneErrorEventAndA502Record,
// TestTheRequestTimeoutBoundsATricklingStream, listed in envoyLimitations):
// once an answer began, a provider that goes silent past its idle timeout,
// or a stream past the request timeout, ends with Envoy resetting the
// client's stream. The client gets the chunks so far, no error event and no
// [DONE]; the upstream step's stream just closes, exactly as when the
// client leaves, so the one usage record says 499 — and still bills what
// the provider produced. Envoy gives ext_proc no signal that tells the two
// apart (no trailers, no response flags in the ext_proc stream); this test
// holds that down, so that a later Envoy that does give one is noticed.
func TestBehindEnvoyAStreamBrokenAfterItBeganResetsTheClient(t *testing.T) {
	t.Parallel()
	requireEnvoy(t) // the other bindings' behaviour: TestBrokenStreamsEndWithOneErrorEventAndA502Record
	for _, c := range []struct {
		fault, requestTimeout string
		chunks                bool // whole chunks reach the client before the fault
	}{
		{faultHangAfter, "30s", true}, // two chunks, then silent past stream_idle_timeout
		{faultTrickle, "1s", false},   // never silent, past the request timeout within the first chunk
	} {
		t.Run(c.fault, func(t *testing.T) {
			t.Parallel()
			p := newFaultProvider(t, always(c.fault))
			tg := startTollgate(t, faultConfig(c.requestTimeout, false, p.URL), "")
			secret := tg.newAccount(t, "me@example.com", "10")
			keyID := tg.onlyKeyID(t, "me@example.com")

			resp := tg.postRaw(t, secret, `{"model":"m","stream":true,`+faultMessages+`}`)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			body, err := io.ReadAll(resp.Body)
			require.Error(t, err, "the client's stream is reset, not ended: %s", body)
			if c.chunks {
				assert.Contains(t, string(body), "data: {", "the chunks before the fault reached the client")
			}
			assert.NotContains(t, string(body), "[DONE]")
			assert.NotContains(t, string(body), `"error"`, "no error event can be added to a reset stream")

			recs := tg.waitDetails(t, keyID, 1)
			require.Len(t, recs, 1, "one record")
			r := recs[0]
			assert.Equal(t, 499, r.Status, "Envoy's reset looks to ext_proc like a client that left")
			assert.Positive(t, r.Cost, "what was produced (the prompt, at least) is billed")
			assert.Equal(t, 10*money.PerDollar-r.Cost, tg.balance(t, "me@example.com"), "and nothing else")
			assert.False(t, strings.Contains(tg.logs.String(), "panic"), "no panic")
		})
	}
}
