// Package testclock is a settable clock for tests of code that takes a
// `now func() time.Time`, so expiry, windows and circuits are tested without
// sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time source that moves only when told to. It is safe for
// concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock that reads start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now returns the clock's time; pass the method value as a `now` option.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (back, if d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
