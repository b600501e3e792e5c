// Package health is the passive health of deployments: a circuit per
// deployment, opened by consecutive failed attempts and closed again by a
// success, the way Envoy's outlier detection ejects and returns hosts.
//
// A circuit is closed (the deployment takes requests), open (it takes none
// until its cooldown has passed) or half-open (the cooldown has passed: the
// next requests probe it). A failure while half-open opens the circuit again
// with the cooldown doubled, up to a maximum; a success closes it and resets
// the cooldown. Nothing runs in the background: states follow from the
// recorded outcomes and the clock, read when asked. Options.OnChange hears
// of the changes an outcome makes (a circuit opening or closing); the end
// of a cooldown is the clock's doing and is seen only by asking.
package health

import (
	"sync"
	"time"
)

// States, as State reports them.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half-open"
)

// Defaults for the zero values of Options.
const (
	DefaultFailureThreshold = 3
	DefaultCooldown         = 30 * time.Second
	DefaultMaxCooldown      = 5 * time.Minute
)

// Options configure a Tracker. Zero values are documented per field.
type Options struct {
	// FailureThreshold is how many consecutive failures open a closed
	// circuit; 0 means DefaultFailureThreshold (3).
	FailureThreshold int
	// Cooldown is how long a circuit first stays open; 0 means
	// DefaultCooldown (30s).
	Cooldown time.Duration
	// MaxCooldown caps the cooldown, which doubles each time a probe fails;
	// 0 means DefaultMaxCooldown (5m), and a value below Cooldown means
	// Cooldown.
	MaxCooldown time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnChange, when set, is called with a deployment's id after an
	// outcome opened its circuit (or opened it again from half-open) or
	// closed an open one; outcomes that change no state are not told. It
	// runs on the caller's goroutine, outside the Tracker's lock, so it
	// must return quickly (a non-blocking send, say) and may call the
	// Tracker.
	OnChange func(id string)
}

// Tracker holds one circuit per deployment id. It is safe for concurrent
// use; the zero value is not usable, call New.
type Tracker struct {
	opt Options

	mu       sync.Mutex
	circuits map[string]*circuit
}

// circuit is one deployment's state. A closed circuit has a zero openUntil.
type circuit struct {
	failures  int           // consecutive failures while closed
	open      bool          // opened, and not closed by a success since
	openUntil time.Time     // end of the current cooldown
	cooldown  time.Duration // the cooldown last applied
}

// New returns a Tracker in which every circuit starts closed.
func New(opt Options) *Tracker {
	if opt.FailureThreshold <= 0 {
		opt.FailureThreshold = DefaultFailureThreshold
	}
	if opt.Cooldown <= 0 {
		opt.Cooldown = DefaultCooldown
	}
	if opt.MaxCooldown <= 0 {
		opt.MaxCooldown = DefaultMaxCooldown
	}
	opt.MaxCooldown = max(opt.MaxCooldown, opt.Cooldown)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	return &Tracker{opt: opt, circuits: map[string]*circuit{}}
}

// Available reports whether the deployment may take a request: its circuit
// is closed, or open with its cooldown passed (half-open). Asking changes
// nothing, so any number of callers may ask; while half-open, every request
// until the first outcome is a probe.
func (t *Tracker) Available(id string) bool {
	return t.State(id) != StateOpen
}

// State is the deployment's circuit state: StateClosed, StateOpen or
// StateHalfOpen. A deployment never reported on is closed.
func (t *Tracker) State(id string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.circuits[id]
	switch {
	case !ok || !c.open:
		return StateClosed
	case t.opt.Now().Before(c.openUntil):
		return StateOpen
	default:
		return StateHalfOpen
	}
}

// Success records an attempt the deployment answered well: its circuit
// closes and its failure count and cooldown start over.
func (t *Tracker) Success(id string) {
	t.mu.Lock()
	c, ok := t.circuits[id]
	// A closed circuit with no failures is the same as no entry.
	delete(t.circuits, id)
	t.mu.Unlock()
	if ok && c.open {
		t.changed(id)
	}
}

// Failure records a failed attempt. A closed circuit opens at the
// threshold of consecutive failures; a half-open one opens again at once,
// for twice its last cooldown (at most MaxCooldown). A failure while open
// (an attempt that began before the circuit opened) changes nothing.
func (t *Tracker) Failure(id string) {
	if t.failure(id) {
		t.changed(id)
	}
}

// failure records a failed attempt and reports whether it opened the
// circuit.
func (t *Tracker) failure(id string) (opened bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.circuits[id]
	if !ok {
		c = &circuit{}
		t.circuits[id] = c
	}
	now := t.opt.Now()
	switch {
	case !c.open:
		c.failures++
		if c.failures >= t.opt.FailureThreshold {
			c.open, c.cooldown = true, t.opt.Cooldown
			c.openUntil = now.Add(c.cooldown)
			return true
		}
	case now.Before(c.openUntil):
		// Still open: the outcome of a request sent before it opened.
	default:
		c.cooldown = min(2*c.cooldown, t.opt.MaxCooldown)
		c.openUntil = now.Add(c.cooldown)
		return true
	}
	return false
}

func (t *Tracker) changed(id string) {
	if t.opt.OnChange != nil {
		t.opt.OnChange(id)
	}
}
