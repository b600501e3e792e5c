package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

func TestCrossedThresholds(t *testing.T) {
	ts := []int{50, 80, 100}
	for _, tc := range []struct {
		name                 string
		before, after, limit money.Nanos
		want                 []int
	}{
		{"below the first", 0, 499, 1000, nil},
		{"reaching a level exactly crosses it", 0, 500, 1000, []int{50}},
		{"one spend across two", 499, 800, 1000, []int{50, 80}},
		{"past the whole budget", 0, 5000, 1000, []int{50, 80, 100}},
		{"already past: no new crossing", 500, 700, 1000, nil},
		{"from exactly a level: not again", 800, 999, 1000, nil},
		{"a zero budget crosses none", 0, 10, 0, nil},
		{"large limits do not overflow", 0, 4_611_686_018_427_387_903, 9_000_000_000_000_000_000 / 2, []int{50, 80, 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, crossedThresholds(tc.before, tc.after, tc.limit, ts))
		})
	}
}

func TestBudgetPotRoundTrips(t *testing.T) {
	p, err := ParseBudgetPot("bgt_abc/1764028800/1764115200")
	require.NoError(t, err)
	require.Equal(t, "bgt_abc/1764028800/1764115200", p.String())
	total, err := ParseBudgetPot("bgt_abc/0/0")
	require.NoError(t, err)
	require.True(t, total.End.IsZero())
	require.Equal(t, "bgt_abc/0/0", total.String())
	for _, bad := range []string{"", "bgt_abc/1", "key_x/1/2", "bgt_abc/x/2"} {
		_, err := ParseBudgetPot(bad)
		require.Error(t, err, bad)
	}
}
