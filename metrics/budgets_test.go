package metrics

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/store"
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

// countingBudgets is a BudgetSource that counts its calls and answers as
// a store with budgets many budgets of each scope and period would.
type countingBudgets struct {
	mu      sync.Mutex
	calls   int
	budgets int64
	err     error
}

func (c *countingBudgets) BudgetGauges(_ context.Context, _ time.Time) ([]store.BudgetGauge, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.err != nil {
		return nil, c.err
	}
	var out []store.BudgetGauge
	for _, scope := range []string{"key", "account"} {
		for _, p := range []string{"day", "week", "month", "total"} {
			out = append(out, store.BudgetGauge{Scope: scope, Period: p, Budgets: c.budgets, Over80: c.budgets / 5, Exhausted: c.budgets / 10})
		}
	}
	return out, nil
}

func TestBudgetRefusalsAreCountedByScopeAndPeriod(t *testing.T) {
	m := New()
	m.BudgetRefused("key", "day")
	m.BudgetRefused("key", "day")
	m.BudgetRefused("account", "total")
	require.Equal(t, map[string]float64{"period=day/scope=key": 2, "period=total/scope=account": 1},
		gathered(t, m, "tollgate_budget_refusals_total"))
}

// TestAScrapeOfManyBudgetsIsOneReadAndEightSeriesAGauge: 10,000 budgets
// of each scope and period are read in one call per scrape, and each gauge
// has a series per scope and period, none per key.
func TestAScrapeOfManyBudgetsIsOneReadAndEightSeriesAGauge(t *testing.T) {
	src := &countingBudgets{budgets: 10_000}
	m := New()
	m.Budgets(src, time.Now, slog.New(slog.DiscardHandler))
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	assert.Equal(t, 1, src.calls, "one store call per scrape")
	byName := map[string]int{}
	for _, f := range fams {
		byName[f.GetName()] = len(f.GetMetric())
	}
	for _, name := range []string{"tollgate_budgets", "tollgate_budgets_over_80_percent", "tollgate_budgets_exhausted"} {
		assert.Equal(t, 8, byName[name], name)
	}
	assert.Equal(t, map[string]float64{"period=day/scope=key": 10_000, "period=week/scope=key": 10_000,
		"period=month/scope=key": 10_000, "period=total/scope=key": 10_000, "period=day/scope=account": 10_000,
		"period=week/scope=account": 10_000, "period=month/scope=account": 10_000, "period=total/scope=account": 10_000},
		gathered(t, m, "tollgate_budgets"))
	assert.InDelta(t, 1000, gathered(t, m, "tollgate_budgets_exhausted")["period=day/scope=key"], 0)
	assert.InDelta(t, 2000, gathered(t, m, "tollgate_budgets_over_80_percent")["period=month/scope=account"], 0)
	assert.Equal(t, 4, src.calls, "one per scrape, three scrapes more")
}

// TestAFailedBudgetReadLeavesTheScrapeWhole: the budget gauges are absent,
// the rest is served, and the failure is logged.
func TestAFailedBudgetReadLeavesTheScrapeWhole(t *testing.T) {
	var logs testenv.Buffer
	m := New()
	m.Budgets(&countingBudgets{err: errors.New("database down")}, time.Now, slog.New(slog.NewTextHandler(&logs, nil)))
	m.BudgetRefused("key", "day")
	assert.Empty(t, gathered(t, m, "tollgate_budgets"))
	assert.Len(t, gathered(t, m, "tollgate_budget_refusals_total"), 1)
	assert.Contains(t, logs.String(), "database down")
}
