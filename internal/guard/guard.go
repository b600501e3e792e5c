// Package guard is the last line of defence at the boundaries where a
// request or a stream begins (an ext_proc stream, an ext_authz check, an
// HTTP handler, a goroutine started for a request): a panic there is
// recovered, so that one request's bug never ends the process and every
// other request in flight with it. The boundary answers its own request
// with an internal error and writes its usage record; guard counts the
// panic (Counts, exported as tollgate_panics_total) and logs it with its
// stack.
//
// It is not error handling: code below a boundary returns errors and
// never relies on a recover.
package guard

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/tollgate/tollgate/oaierror"
)

// Panic is a panic recovered at a boundary.
type Panic struct {
	// Where names the boundary (extproc_router, edge, dashboard…).
	Where string
	// Value is what was passed to panic.
	Value any
	// Stack is the panicking goroutine's stack.
	Stack []byte
}

// Error describes the panic (its value clipped: it is for a log line).
func (p *Panic) Error() string {
	return fmt.Sprintf("panic in %s: %s", p.Where, oaierror.Clip(fmt.Sprint(p.Value), 300))
}

// Recover, deferred at a boundary (defer guard.Recover(where, log,
// handle)), recovers a panic of its goroutine: it counts it under where,
// calls handle — which answers the request and writes its record, and
// returns the request id — and logs it at error level with the request id
// and the stack. handle may be nil. A panic inside handle is recovered,
// counted and logged as well: Recover itself never panics, except to let
// http.ErrAbortHandler (net/http's deliberate abort) through.
func Recover(where string, log *slog.Logger, handle func(*Panic) (requestID string)) {
	v := recover()
	if v == nil {
		return
	}
	if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
		panic(v)
	}
	caught(where, log, &Panic{Where: where, Value: v, Stack: debug.Stack()}, handle)
}

func caught(where string, log *slog.Logger, p *Panic, handle func(*Panic) string) {
	count(where)
	id := ""
	if handle != nil {
		id = handleSafely(where, log, p, handle)
	}
	if log == nil {
		log = slog.Default()
	}
	log.Error("panic recovered; the request ends with an internal error", "where", where,
		"request_id", id, "panic", oaierror.Clip(fmt.Sprint(p.Value), 300), "stack", string(p.Stack))
}

// handleSafely runs handle; a panic of its own is counted and logged, and
// the request's id is then unknown.
func handleSafely(where string, log *slog.Logger, p *Panic, handle func(*Panic) string) (id string) {
	defer func() {
		if v := recover(); v != nil {
			count(where)
			if log == nil {
				log = slog.Default()
			}
			log.Error("panic while answering a recovered panic", "where", where,
				"panic", oaierror.Clip(fmt.Sprint(v), 300), "stack", string(debug.Stack()))
		}
	}()
	return handle(p)
}

// Go runs f in a new goroutine (one started for a request, owned by the
// caller as f's own contract says) under Recover: a panic in it is counted
// and logged, and ends only that goroutine.
func Go(where string, log *slog.Logger, f func()) {
	go func() {
		defer Recover(where, log, nil)
		f()
	}()
}

var (
	mu     sync.Mutex
	counts = map[string]*atomic.Int64{}
)

func count(where string) {
	mu.Lock()
	c := counts[where]
	if c == nil {
		c = new(atomic.Int64)
		counts[where] = c
	}
	mu.Unlock()
	c.Add(1)
}

// Count is the number of panics recovered at a boundary.
type Count struct {
	Where string
	N     int64
}

// Counts are the panics recovered in this process so far, by boundary,
// sorted by name.
func Counts() []Count {
	mu.Lock()
	out := make([]Count, 0, len(counts))
	for w, c := range counts {
		out = append(out, Count{Where: w, N: c.Load()})
	}
	mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Where < out[j].Where })
	return out
}

// CountOf is the number of panics recovered at where so far.
func CountOf(where string) int64 {
	mu.Lock()
	defer mu.Unlock()
	if c := counts[where]; c != nil {
		return c.Load()
	}
	return 0
}
