package admission

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestAGateRefusesAtItsLimitAndAdmitsAgainWhenARequestLeaves(t *testing.T) {
	g := New(2)
	assert.True(t, g.Admit())
	a := g.Enter()
	assert.True(t, g.Admit())
	b := g.Enter()
	assert.False(t, g.Admit(), "two in flight: full")
	assert.False(t, g.Admit())
	assert.EqualValues(t, 2, g.Refused())
	a()
	a() // a second leave is no second departure
	assert.EqualValues(t, 1, g.InFlight())
	assert.True(t, g.Admit(), "one left: room again")
	b()
	assert.EqualValues(t, 0, g.InFlight())
}

func TestAGateWithoutALimitAndANilGateAdmitEverything(t *testing.T) {
	for name, g := range map[string]*Gate{"no limit": New(0), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			for range 100 {
				g.Enter()
			}
			assert.True(t, g.Admit())
			assert.EqualValues(t, 0, g.Refused())
		})
	}
}

func TestConcurrentEntriesAndLeavesReturnToZero(t *testing.T) {
	g := New(10)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 100 {
				leave := g.Enter()
				g.Admit()
				leave()
			}
		})
	}
	wg.Wait()
	assert.EqualValues(t, 0, g.InFlight())
	assert.True(t, g.Admit())
}
