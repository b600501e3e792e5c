// Package admission sheds load past capacity. A Gate counts the requests a
// replica is serving (each open ext_proc stream: the router step while the
// request is checked and sent, the upstream step while its answer
// streams) and says when that count has reached the replica's limit;
// ext_authz then refuses new requests at once with an OpenAI-shaped 503
// and a Retry-After, before any key lookup or database work, while the
// requests already admitted run to their end. The count falls as streams
// end, however they end, so the replica takes new requests again as soon
// as the load drops: nothing is leaked and nothing has to be reset.
package admission

import "sync/atomic"

// RetryAfterSeconds is the Retry-After of a request refused at capacity:
// the load that filled the gate moves on within seconds (streams end, or
// a load balancer sends the retry to another replica).
const RetryAfterSeconds = 1

// Gate counts requests in flight against a limit. The zero value and a
// nil *Gate admit everything. Its methods are safe for concurrent use.
type Gate struct {
	limit   int64
	n       atomic.Int64
	refused atomic.Int64
}

// New returns a gate that is full at limit requests in flight; limit 0 or
// less never fills.
func New(limit int) *Gate { return &Gate{limit: int64(limit)} }

// Enter counts one request in flight until the returned leave is called
// (once; later calls do nothing). It never refuses: whether to take a new
// request is Admit's question, asked before the work begins.
func (g *Gate) Enter() (leave func()) {
	if g == nil {
		return func() {}
	}
	g.n.Add(1)
	var left atomic.Bool
	return func() {
		if left.CompareAndSwap(false, true) {
			g.n.Add(-1)
		}
	}
}

// Admit reports whether a new request may begin: false when the requests
// in flight have reached the limit, and the refusal is counted.
func (g *Gate) Admit() bool {
	if g == nil || g.limit <= 0 || g.n.Load() < g.limit {
		return true
	}
	g.refused.Add(1)
	return false
}

// InFlight is the number of requests counted now.
func (g *Gate) InFlight() int64 {
	if g == nil {
		return 0
	}
	return g.n.Load()
}

// Refused is the number of requests Admit has refused.
func (g *Gate) Refused() int64 {
	if g == nil {
		return 0
	}
	return g.refused.Load()
}

// Limit is the gate's limit (0: none).
func (g *Gate) Limit() int64 {
	if g == nil || g.limit < 0 {
		return 0
	}
	return g.limit
}
