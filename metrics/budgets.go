package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Spend budgets: a counter of refusals, and the money each key budget has
// left in its window, read at scrape time. The gauge has a series per key
// budget only (at most four per key, and only for keys that have one), so
// its cardinality is the number of key budgets, bounded by
// MaxBudgetSeries.

// MaxBudgetSeries bounds the series of tollgate_budget_remaining_nanos; a
// scrape reports the first ones only.
const MaxBudgetSeries = 10_000

// newBudgetRefusals makes and registers tollgate_budget_refusals_total.
func newBudgetRefusals(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_budget_refusals_total",
		Help: "Requests refused because a spend budget was spent (429 budget_exceeded), by the scope (key, account) and period of the budget named.",
	}, []string{"scope", "period"})
	r.MustRegister(c)
	return c
}

// BudgetRefused counts one refusal by a budget of scope and period.
func (m *Metrics) BudgetRefused(scope, period string) {
	m.budgetRefusals.WithLabelValues(scope, period).Inc()
}

// BudgetRemaining is what one key budget has left in its current window.
type BudgetRemaining struct {
	KeyID, Period string
	Nanos         int64
}

var budgetRemainingDesc = prometheus.NewDesc("tollgate_budget_remaining_nanos",
	"Nano-dollars a key's spend budget has left in its current window (amount − spent, at least 0); only keys with a budget have series.",
	[]string{"key_id", "period"}, nil)

// BudgetsRemaining registers tollgate_budget_remaining_nanos; list returns
// the key budgets at scrape time.
func (m *Metrics) BudgetsRemaining(list func() []BudgetRemaining) {
	m.Registry.MustRegister(budgetCollector{list: list})
}

type budgetCollector struct{ list func() []BudgetRemaining }

func (budgetCollector) Describe(ch chan<- *prometheus.Desc) { ch <- budgetRemainingDesc }

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	for i, b := range c.list() {
		if i >= MaxBudgetSeries {
			return
		}
		ch <- prometheus.MustNewConstMetric(budgetRemainingDesc, prometheus.GaugeValue, float64(b.Nanos), b.KeyID, b.Period)
	}
}
