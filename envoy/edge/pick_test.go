package edge

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fixedRand returns the given values in turn, each checked against n.
func fixedRand(t *testing.T, values ...int) func(int) int {
	return func(n int) int {
		t.Helper()
		require.NotEmpty(t, values, "more random draws than expected")
		v := values[0]
		values = values[1:]
		require.Less(t, v, n, "draw out of range [0,%d)", n)
		return v
	}
}

func noRand(t *testing.T) func(int) int {
	return func(n int) int {
		t.Fatalf("no random draw expected (n=%d)", n)
		return 0
	}
}

func TestPickTakesTheLowestPriorityNotSkipped(t *testing.T) {
	eps := []Endpoint{
		{Deployment: "backup", Priority: 1},
		{Deployment: "primary", Priority: 0},
		{Deployment: "last", Priority: 2},
	}
	tests := []struct {
		name string
		skip []bool
		want string
	}{
		{"nothing skipped", []bool{false, false, false}, "primary"},
		{"primary tried or ejected", []bool{false, true, false}, "backup"},
		{"only the last left", []bool{true, true, false}, "last"},
		{"lower priority ejected, higher one tried", []bool{true, false, false}, "primary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			i, ok := pick(eps, tt.skip, noRand(t))
			require.True(t, ok)
			assert.Equal(t, tt.want, eps[i].Deployment)
		})
	}
}

func TestPickReportsWhenEveryEndpointIsSkipped(t *testing.T) {
	eps := []Endpoint{{Deployment: "a"}, {Deployment: "b", Priority: 1}}
	_, ok := pick(eps, []bool{true, true}, noRand(t))
	assert.False(t, ok)
	_, ok = pick(nil, nil, noRand(t))
	assert.False(t, ok)
}

func TestPickWeighsEndpointsOfOnePriority(t *testing.T) {
	// Weights 1, 3 and (unset, counted as) 1 at priority 0: draws 0 → a,
	// 1..3 → b, 4 → c. The priority-1 endpoint is never drawn.
	eps := []Endpoint{
		{Deployment: "a", Weight: 1},
		{Deployment: "b", Weight: 3},
		{Deployment: "other", Weight: 100, Priority: 1},
		{Deployment: "c"},
	}
	want := []string{"a", "b", "b", "b", "c"}
	for draw, dep := range want {
		i, ok := pick(eps, make([]bool, len(eps)), fixedRand(t, draw))
		require.True(t, ok)
		assert.Equal(t, dep, eps[i].Deployment, "draw %d", draw)
	}
}

func TestPickWeighsOnlyEndpointsNotSkipped(t *testing.T) {
	eps := []Endpoint{
		{Deployment: "a", Weight: 2},
		{Deployment: "b", Weight: 5},
		{Deployment: "c", Weight: 1},
	}
	// b ejected: the draw is over a's 2 and c's 1.
	skip := []bool{false, true, false}
	for draw, dep := range []string{"a", "a", "c"} {
		i, ok := pick(eps, skip, fixedRand(t, draw))
		require.True(t, ok)
		assert.Equal(t, dep, eps[i].Deployment, "draw %d", draw)
	}
}

func TestPickChoosesTheOnlyCandidateOfItsPriority(t *testing.T) {
	eps := []Endpoint{{Deployment: "a", Weight: 7}, {Deployment: "b", Priority: 1, Weight: 1}}
	i, ok := pick(eps, []bool{false, false}, fixedRand(t, 6))
	require.True(t, ok)
	assert.Equal(t, "a", eps[i].Deployment, "whatever the draw over its weight")
	i, ok = pick(eps, []bool{true, false}, noRand(t)) // weight 1: no draw at all
	require.True(t, ok)
	assert.Equal(t, "b", eps[i].Deployment)
}

func TestRandIntStaysInRange(t *testing.T) {
	for range 200 {
		v := randInt(3)
		require.GreaterOrEqual(t, v, 0)
		require.Less(t, v, 3)
	}
	assert.Equal(t, 0, randInt(1))
}
