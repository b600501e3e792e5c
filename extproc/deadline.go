package extproc

import (
	"context"
	"sync"
	"time"
)

// stepContext is what a step may spend on one message: its stream's
// context until a deadline. It becomes a context with a timer only when
// something waits on it (Done, or a context made from it: a database
// call, a remote rate limit); most messages are answered from memory
// (the key cache, the leases, the in-memory limits), and a timer and its
// context were four of every message's allocations. Its deadline, error
// and values are the same either way.
type stepContext struct {
	context.Context // the stream's
	deadline        time.Time

	mu     sync.Mutex
	timed  context.Context // made by timer when first waited on
	cancel context.CancelFunc
	// ended is when end was called: from then it is canceled (or past
	// its deadline, if that came first), as a timeout context is.
	ended time.Time
}

// withStepDeadline is parent until d from now; end releases it when the
// message is answered.
func withStepDeadline(parent context.Context, d time.Duration) *stepContext {
	return new(stepContext).start(parent, d)
}

// start makes c parent until d from now: a step keeps its messages'
// contexts in its own state, for no allocation. A c started before (a
// second message of a kind that comes once) is left as it is, for what
// was made from it, and a new context is started.
func (c *stepContext) start(parent context.Context, d time.Duration) *stepContext {
	if c.Context != nil {
		c = new(stepContext)
	}
	c.Context, c.deadline = parent, time.Now().Add(d)
	return c
}

// timer is the context with the deadline's timer, made on first use.
func (c *stepContext) timer() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.timed == nil {
		c.timed, c.cancel = context.WithDeadline(c.Context, c.deadline)
		if !c.ended.IsZero() {
			c.cancel() // first waited on after its message was answered
		}
	}
	return c.timed
}

// made is the timed context when one was made, else nil.
func (c *stepContext) made() context.Context {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.timed
}

func (c *stepContext) Deadline() (time.Time, bool) {
	if d, ok := c.Context.Deadline(); ok && d.Before(c.deadline) {
		return d, true
	}
	return c.deadline, true
}

func (c *stepContext) Done() <-chan struct{} { return c.timer().Done() }

func (c *stepContext) Err() error {
	c.mu.Lock()
	t, ended := c.timed, c.ended
	c.mu.Unlock()
	if t != nil {
		return t.Err()
	}
	if err := c.Context.Err(); err != nil {
		return err
	}
	if !ended.IsZero() {
		if ended.Before(c.deadline) {
			return context.Canceled
		}
		return context.DeadlineExceeded
	}
	if !time.Now().Before(c.deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// Value is the timed context's once made (so that context.Cause reads
// its cause), the stream's before.
func (c *stepContext) Value(key any) any {
	if t := c.made(); t != nil {
		return t.Value(key)
	}
	return c.Context.Value(key)
}

// AfterFunc lets a context made from this one end with it without a
// goroutine of its own (the context package looks for this method).
func (c *stepContext) AfterFunc(f func()) (stop func() bool) {
	return context.AfterFunc(c.timer(), f)
}

// end cancels it, as a timeout context's cancel does, and releases its
// timer if one was made.
func (c *stepContext) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended.IsZero() {
		c.ended = time.Now()
	}
	if c.cancel != nil {
		c.cancel()
	}
}
