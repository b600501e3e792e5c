package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// t0 is a window boundary: exactly :00 of a UTC minute.
var t0 = time.Date(2026, 3, 14, 15, 9, 0, 0, time.UTC)

func TestWindowAtAlignsToTheUTCMinute(t *testing.T) {
	kolkata := time.FixedZone("IST", 5*3600+30*60)
	tests := []struct {
		name      string
		now       time.Time
		wantStart time.Time
		wantReset time.Duration
	}{
		{"exactly :00 opens a new window", t0, t0, time.Minute},
		{"one nanosecond before :00 is the previous window", t0.Add(-time.Nanosecond), t0.Add(-time.Minute), time.Nanosecond},
		{"mid-window", t0.Add(17*time.Second + 250*time.Millisecond), t0, 42*time.Second + 750*time.Millisecond},
		{"last nanosecond of the window", t0.Add(time.Minute - time.Nanosecond), t0, time.Nanosecond},
		{"time zone of now does not matter", t0.Add(5 * time.Second).In(kolkata), t0, 55 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := windowAt(tt.now)
			assert.Equal(t, tt.wantStart.Unix(), w.start)
			assert.Equal(t, tt.wantReset, w.reset)
		})
	}
}

func TestWindowAtUsesTheWallClock(t *testing.T) {
	now := time.Now() // carries a monotonic reading
	assert.Equal(t, windowAt(now.Round(0)), windowAt(now))
}

// step is one check in a semantics test: at t0+at, key asks with limit.
type step struct {
	at    time.Duration
	key   string
	limit int
	want  Result
}

// semanticsTests describe what every Limiter must answer; each test runs
// against a fresh limiter.
var semanticsTests = []struct {
	name  string
	steps []step
}{
	{
		name: "first request at :00 opens a full window",
		steps: []step{
			{0, "k", 3, Result{Allowed: true, Limit: 3, Remaining: 2, Reset: time.Minute}},
		},
	},
	{
		name: "remaining counts down to zero, then requests are rejected until the window ends",
		steps: []step{
			{1 * time.Second, "k", 3, Result{true, 3, 2, 59 * time.Second}},
			{2 * time.Second, "k", 3, Result{true, 3, 1, 58 * time.Second}},
			{30*time.Second + 500*time.Millisecond, "k", 3, Result{true, 3, 0, 29*time.Second + 500*time.Millisecond}},
			{31 * time.Second, "k", 3, Result{false, 3, 0, 29 * time.Second}},
			{time.Minute - time.Millisecond, "k", 3, Result{false, 3, 0, time.Millisecond}},
		},
	},
	{
		name: "the window ends exactly at the next :00",
		steps: []step{
			{10 * time.Second, "k", 1, Result{true, 1, 0, 50 * time.Second}},
			{time.Minute - time.Nanosecond, "k", 1, Result{false, 1, 0, time.Nanosecond}},
			{time.Minute, "k", 1, Result{true, 1, 0, time.Minute}},
			{time.Minute + time.Second, "k", 1, Result{false, 1, 0, 59 * time.Second}},
		},
	},
	{
		name: "a request whose clock was read before the minute turned counts in its own window",
		steps: []step{
			{time.Minute, "k", 1, Result{true, 1, 0, time.Minute}},
			{time.Minute - time.Second, "k", 1, Result{true, 1, 0, time.Second}},
			{time.Minute - time.Millisecond, "k", 1, Result{false, 1, 0, time.Millisecond}},
		},
	},
	{
		name: "keys are counted apart",
		steps: []step{
			{0, "a", 1, Result{true, 1, 0, time.Minute}},
			{0, "b", 1, Result{true, 1, 0, time.Minute}},
			{time.Second, "a", 1, Result{false, 1, 0, 59 * time.Second}},
		},
	},
	{
		name: "a raised limit applies to the requests already admitted; refused ones are not counted",
		steps: []step{
			{0, "k", 1, Result{true, 1, 0, time.Minute}},
			{time.Second, "k", 1, Result{false, 1, 0, 59 * time.Second}},
			{2 * time.Second, "k", 5, Result{true, 5, 3, 58 * time.Second}},
		},
	},
	{
		name: "a lowered limit applies to the requests already admitted",
		steps: []step{
			{0, "k", 5, Result{true, 5, 4, time.Minute}},
			{time.Second, "k", 5, Result{true, 5, 3, 59 * time.Second}},
			{2 * time.Second, "k", 2, Result{false, 2, 0, 58 * time.Second}},
			{3 * time.Second, "k", 3, Result{true, 3, 0, 57 * time.Second}},
			{4 * time.Second, "k", 3, Result{false, 3, 0, 56 * time.Second}},
		},
	},
	{
		name: "after a quiet window the count starts from zero",
		steps: []step{
			{0, "k", 2, Result{true, 2, 1, time.Minute}},
			{5 * time.Minute, "k", 2, Result{true, 2, 1, time.Minute}},
		},
	},
}

// testSemantics runs semanticsTests against limiters made by newLimiter.
func testSemantics(t *testing.T, newLimiter func(t *testing.T) Limiter) {
	for _, tt := range semanticsTests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(t)
			for i, s := range tt.steps {
				got, err := l.Allow(context.Background(), s.key, s.limit, t0.Add(s.at))
				require.NoError(t, err, "step %d", i)
				assert.Equal(t, s.want, got, "step %d: %q at t0+%v", i, s.key, s.at)
			}
		})
	}
}

// testRejectsInvalidArguments checks the argument errors every Limiter returns.
func testRejectsInvalidArguments(t *testing.T, l Limiter) {
	tests := []struct {
		name  string
		key   string
		limit int
		want  error
	}{
		{"zero limit", "k", 0, ErrInvalidLimit},
		{"negative limit", "k", -1, ErrInvalidLimit},
		{"empty key", "", 1, ErrEmptyKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := l.Allow(context.Background(), tt.key, tt.limit, t0)
			assert.ErrorIs(t, err, tt.want)
		})
	}
}
