package health

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testclock"
)

func newTracker(opt Options) (*Tracker, *testclock.Clock) {
	c := testclock.New(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	opt.Now = c.Now
	return New(opt), c
}

// step is one event in a circuit's life: an outcome, or time passing; then
// the state expected after it.
type step struct {
	do   string // "fail", "ok" or "wait"
	wait time.Duration
	want string
}

// play does the step to the deployment's circuit.
func (s step) play(tr *Tracker, clk *testclock.Clock, id string) {
	switch s.do {
	case "fail":
		tr.Failure(id)
	case "ok":
		tr.Success(id)
	case "wait":
		clk.Advance(s.wait)
	}
}

func fail(want string) step                  { return step{do: "fail", want: want} }
func ok(want string) step                    { return step{do: "ok", want: want} }
func wait(d time.Duration, want string) step { return step{do: "wait", wait: d, want: want} }

func TestCircuitLifecycle(t *testing.T) {
	const (
		closed   = StateClosed
		open     = StateOpen
		halfOpen = StateHalfOpen
	)
	tests := []struct {
		name  string
		opt   Options
		steps []step
	}{
		{
			name:  "a new deployment is closed",
			steps: []step{wait(time.Hour, closed)},
		},
		{
			name:  "failures below the threshold keep it closed",
			steps: []step{fail(closed), fail(closed)},
		},
		{
			name:  "the default threshold of three consecutive failures opens it",
			steps: []step{fail(closed), fail(closed), fail(open)},
		},
		{
			name:  "a success resets the count of consecutive failures",
			steps: []step{fail(closed), fail(closed), ok(closed), fail(closed), fail(closed), fail(open)},
		},
		{
			name: "it stays open for the cooldown, then is half-open",
			steps: []step{fail(closed), fail(closed), fail(open),
				wait(30*time.Second-time.Nanosecond, open), wait(time.Nanosecond, halfOpen)},
		},
		{
			name: "a successful probe closes it",
			steps: []step{fail(closed), fail(closed), fail(open), wait(30*time.Second, halfOpen),
				ok(closed), fail(closed), fail(closed), fail(open)},
		},
		{
			name: "a failed probe opens it again for twice the cooldown",
			steps: []step{fail(closed), fail(closed), fail(open), wait(30*time.Second, halfOpen),
				fail(open), wait(59*time.Second, open), wait(time.Second, halfOpen),
				fail(open), wait(119*time.Second, open), wait(time.Second, halfOpen)},
		},
		{
			name: "the cooldown doubles up to the maximum",
			opt:  Options{FailureThreshold: 1, Cooldown: time.Minute, MaxCooldown: 3 * time.Minute},
			steps: []step{fail(open), wait(time.Minute, halfOpen),
				fail(open), wait(2*time.Minute, halfOpen),
				fail(open), wait(3*time.Minute-time.Nanosecond, open), wait(time.Nanosecond, halfOpen),
				fail(open), wait(3*time.Minute, halfOpen)},
		},
		{
			name: "a success after reopening starts over from the first cooldown",
			opt:  Options{FailureThreshold: 1, Cooldown: time.Minute},
			steps: []step{fail(open), wait(time.Minute, halfOpen), fail(open), wait(2*time.Minute, halfOpen),
				ok(closed), fail(open), wait(time.Minute, halfOpen)},
		},
		{
			name: "a failure while open does not extend the cooldown",
			opt:  Options{FailureThreshold: 2, Cooldown: 10 * time.Second},
			steps: []step{fail(closed), fail(open), wait(5*time.Second, open), fail(open),
				wait(5*time.Second, halfOpen)},
		},
		{
			name:  "a success while open closes it (a request sent before it opened)",
			opt:   Options{FailureThreshold: 1},
			steps: []step{fail(open), ok(closed)},
		},
		{
			name:  "a threshold of one opens at the first failure",
			opt:   Options{FailureThreshold: 1},
			steps: []step{fail(open)},
		},
		{
			name: "a maximum below the cooldown means the cooldown",
			opt:  Options{FailureThreshold: 1, Cooldown: time.Minute, MaxCooldown: time.Second},
			steps: []step{fail(open), wait(time.Minute, halfOpen), fail(open),
				wait(time.Minute-time.Nanosecond, open), wait(time.Nanosecond, halfOpen)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk := newTracker(tt.opt)
			const id = "gpt-4o#0"
			for i, s := range tt.steps {
				s.play(tr, clk, id)
				require.Equal(t, s.want, tr.State(id), "after step %d (%s %v)", i, s.do, s.wait)
				require.Equal(t, s.want != StateOpen, tr.Available(id), "Available after step %d", i)
			}
		})
	}
}

func TestCircuitsOfDeploymentsAreIndependent(t *testing.T) {
	tr, _ := newTracker(Options{FailureThreshold: 1})
	tr.Failure("a#0")
	assert.False(t, tr.Available("a#0"))
	assert.True(t, tr.Available("a#1"))
	assert.Equal(t, StateClosed, tr.State("b#0"))
}

func TestZeroOptionsTakeTheDefaults(t *testing.T) {
	tr := New(Options{})
	assert.Equal(t, DefaultFailureThreshold, tr.opt.FailureThreshold)
	assert.Equal(t, DefaultCooldown, tr.opt.Cooldown)
	assert.Equal(t, DefaultMaxCooldown, tr.opt.MaxCooldown)
	require.NotNil(t, tr.opt.Now)
	for range DefaultFailureThreshold {
		tr.Failure("d")
	}
	assert.Equal(t, StateOpen, tr.State("d"), "the real clock does not pass 30s here")
}

// TestTrackerIsSafeForConcurrentUse is meant for -race: outcomes and
// questions from many goroutines on shared and separate deployments.
func TestTrackerIsSafeForConcurrentUse(t *testing.T) {
	tr, clk := newTracker(Options{FailureThreshold: 2, Cooldown: time.Millisecond})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				id := fmt.Sprintf("m#%d", (g+i)%3)
				switch i % 4 {
				case 0, 1:
					tr.Failure(id)
				case 2:
					tr.Success(id)
				default:
					clk.Advance(time.Millisecond)
				}
				_ = tr.Available(id)
				_ = tr.State(id)
			}
		})
	}
	wg.Wait()
	for i := range 3 {
		id := fmt.Sprintf("m#%d", i)
		assert.Contains(t, []string{StateClosed, StateOpen, StateHalfOpen}, tr.State(id))
	}
}

func TestOnChangeHearsOfTheChangesOutcomesMake(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		told  []bool // after each step, whether OnChange was called
	}{
		{
			name:  "failures below the threshold change nothing",
			steps: []step{fail(StateClosed), fail(StateClosed), ok(StateClosed)},
			told:  []bool{false, false, false},
		},
		{
			name:  "the failure that opens the circuit is told",
			steps: []step{fail(StateClosed), fail(StateClosed), fail(StateOpen), fail(StateOpen)},
			told:  []bool{false, false, true, false},
		},
		{
			name: "the end of the cooldown is not told; a failed probe and a successful one are",
			steps: []step{fail(StateClosed), fail(StateClosed), fail(StateOpen), wait(30*time.Second, StateHalfOpen),
				fail(StateOpen), wait(time.Minute, StateHalfOpen), ok(StateClosed), ok(StateClosed)},
			told: []bool{false, false, true, false, true, false, true, false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const id = "gpt-4o#0"
			var told []string
			tr, clk := newTracker(Options{OnChange: func(got string) { told = append(told, got) }})
			for i, s := range tt.steps {
				before := len(told)
				s.play(tr, clk, id)
				require.Equal(t, s.want, tr.State(id), "after step %d", i)
				require.Equal(t, tt.told[i], len(told) > before, "told after step %d (%s)", i, s.do)
			}
			for _, got := range told {
				assert.Equal(t, id, got)
			}
		})
	}
}

func TestOnChangeMayAskTheTracker(t *testing.T) {
	var tr *Tracker
	var states []string
	tr, _ = newTracker(Options{FailureThreshold: 1, OnChange: func(id string) { states = append(states, tr.State(id)) }})
	tr.Failure("d")
	tr.Success("d")
	assert.Equal(t, []string{StateOpen, StateClosed}, states, "called outside the lock, after the change")
}
