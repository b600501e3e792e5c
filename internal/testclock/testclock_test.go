package testclock

import (
	"testing"
	"time"
)

func TestClockMovesOnlyWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := New(start)
	if got := c.Now(); !got.Equal(start) {
		t.Fatalf("Now() = %v, want %v", got, start)
	}
	c.Advance(90 * time.Second)
	c.Advance(-30 * time.Second)
	if got, want := c.Now(), start.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after advancing: Now() = %v, want %v", got, want)
	}
}
