package metrics

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// gathered is each sample of the family name, by its labels' values
// joined with "/".
func gathered(t *testing.T, m *Metrics, name string) map[string]float64 {
	t.Helper()
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, s := range f.GetMetric() {
			var labels []string
			for _, l := range s.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := s.GetCounter().GetValue() + s.GetGauge().GetValue()
			out[strings.Join(labels, "/")] = v
		}
	}
	return out
}

func TestBudgetRefusalsAndWhatKeyBudgetsHaveLeft(t *testing.T) {
	m := New()
	m.BudgetRefused("key", "day")
	m.BudgetRefused("key", "day")
	m.BudgetRefused("account", "total")
	m.BudgetsRemaining(func() []BudgetRemaining {
		return []BudgetRemaining{{KeyID: "key_a", Period: "day", Nanos: 1500}, {KeyID: "key_a", Period: "month", Nanos: 0}}
	})
	require.Equal(t, map[string]float64{"period=day/scope=key": 2, "period=total/scope=account": 1},
		gathered(t, m, "tollgate_budget_refusals_total"))
	require.Equal(t, map[string]float64{"key_id=key_a/period=day": 1500, "key_id=key_a/period=month": 0},
		gathered(t, m, "tollgate_budget_remaining_nanos"))
}

func TestTheBudgetGaugeIsBounded(t *testing.T) {
	m := New()
	m.BudgetsRemaining(func() []BudgetRemaining {
		out := make([]BudgetRemaining, MaxBudgetSeries+5)
		for i := range out {
			out[i] = BudgetRemaining{KeyID: "key_" + strconv.Itoa(i), Period: "day"}
		}
		return out
	})
	require.Len(t, gathered(t, m, "tollgate_budget_remaining_nanos"), MaxBudgetSeries)
}
