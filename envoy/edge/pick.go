package edge

import (
	"crypto/rand"
	"math/big"
)

// pick chooses the next endpoint the way Envoy's retry host predicate
// (previous_hosts) and retry priority (previous_priorities) do, among the
// endpoints not skipped (tried, or ejected by outlier detection): the lowest
// priority with such an endpoint, weighted at random within it. ok is false
// when every endpoint is skipped. randInt(n) returns an int in [0, n).
func pick(eps []Endpoint, skip []bool, randInt func(n int) int) (i int, ok bool) {
	best := -1
	for i, ep := range eps {
		if !skip[i] && (best < 0 || ep.Priority < eps[best].Priority) {
			best = i
		}
	}
	if best < 0 {
		return 0, false
	}
	prio := eps[best].Priority
	total := 0
	for i, ep := range eps {
		if !skip[i] && ep.Priority == prio {
			total += max(ep.Weight, 1)
		}
	}
	n := 0
	if total > 1 {
		n = randInt(total)
	}
	for i, ep := range eps {
		if skip[i] || ep.Priority != prio {
			continue
		}
		n -= max(ep.Weight, 1)
		if n < 0 {
			return i, true
		}
	}
	return best, true
}

func randInt(n int) int {
	if n <= 1 {
		return 0
	}
	v, err := rand.Int(rand.Reader, big.NewInt(int64(n)))
	if err != nil {
		return 0
	}
	return int(v.Int64())
}
