package metrics

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/guard"
)

// TestPanicsAreCountedByBoundary: a panic recovered by guard shows in
// tollgate_panics_total under its boundary.
func TestPanicsAreCountedByBoundary(t *testing.T) {
	m := New()
	func() {
		defer guard.Recover("metrics_test", nil, nil)
		panic("boom")
	}()
	families, err := m.Registry.Gather()
	require.NoError(t, err)
	found := false
	for _, f := range families {
		if f.GetName() != "tollgate_panics_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			if s.GetLabel()[0].GetName() == "where" && s.GetLabel()[0].GetValue() == "metrics_test" {
				found = true
				assert.InDelta(t, 1, s.GetCounter().GetValue(), 0)
			}
		}
	}
	assert.True(t, found, "tollgate_panics_total{where=metrics_test}")
}
