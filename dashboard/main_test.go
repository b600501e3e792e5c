package dashboard

import (
	"os"
	"sync"
	"testing"
)

// cheapParams hash the tests' passwords: OWASP's cost is 19 MiB and two
// passes per hash, about a second of CPU under the race detector, and most
// tests sign in several times without testing the hash's cost. The tests of
// the cost itself (the hash's own tests, the sign-in spray)
// put OWASP's back with withOWASPCost.
var cheapParams = argon2Params{memory: 64, time: 1, threads: 1, keyLen: 32}

func TestMain(m *testing.M) {
	currentParams = cheapParams
	os.Exit(m.Run())
}

// withOWASPCost makes new hashes, and the dummy hash an unknown email is
// checked against, cost what they cost in production, until the test ends.
// The package's tests do not run in parallel.
func withOWASPCost(t *testing.T) {
	params, dummy := currentParams, dummyHash
	currentParams = owaspParams
	dummyHash = sync.OnceValue(func() string {
		return encodeHash(currentParams, []byte("tollgate-dummy-salt"), "no password matches this one")
	})
	t.Cleanup(func() { currentParams, dummyHash = params, dummy })
}
