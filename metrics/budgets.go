package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tollgate/tollgate/store"
)

// Spend budgets: a counter of refusals, and gauges of the budgets in force
// read at scrape time, by scope (key, team, account) and period only — never a
// key or an account — so their series number eight per gauge, however many
// budgets there are, and a scrape costs one query (store.BudgetGauges).

// newBudgetRefusals makes and registers tollgate_budget_refusals_total.
func newBudgetRefusals(r *prometheus.Registry) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_budget_refusals_total",
		Help: "Requests refused because a spend budget was spent (429 budget_exceeded), by the scope (key, team, account) and period of the budget named.",
	}, []string{"scope", "period"})
	r.MustRegister(c)
	return c
}

// BudgetRefused counts one refusal by a budget of scope and period.
func (m *Metrics) BudgetRefused(scope, period string) {
	m.budgetRefusals.WithLabelValues(scope, period).Inc()
}

// BudgetSource is what the budget gauges read: called once per scrape.
type BudgetSource interface {
	BudgetGauges(ctx context.Context, now time.Time) ([]store.BudgetGauge, error)
}

// BudgetReadTimeout bounds a scrape's read of the budgets.
const BudgetReadTimeout = 5 * time.Second

var (
	budgetsDesc = prometheus.NewDesc("tollgate_budgets",
		"Spend budgets in force (a key's while the key lives), by scope (key, team, account) and period.",
		[]string{"scope", "period"}, nil)
	budgetsOver80Desc = prometheus.NewDesc("tollgate_budgets_over_80_percent",
		"Spend budgets that have spent at least 80 % of their amount in their current window (the exhausted included), by scope and period.",
		[]string{"scope", "period"}, nil)
	budgetsExhaustedDesc = prometheus.NewDesc("tollgate_budgets_exhausted",
		"Spend budgets that have spent all of their amount in their current window (their requests are refused until it ends), by scope and period.",
		[]string{"scope", "period"}, nil)
)

// Budgets registers tollgate_budgets, tollgate_budgets_over_80_percent and
// tollgate_budgets_exhausted, read from src at scrape time (at now()). A
// read that fails is logged and its gauges are absent from that scrape.
func (m *Metrics) Budgets(src BudgetSource, now func() time.Time, log *slog.Logger) {
	m.Registry.MustRegister(budgetCollector{src: src, now: now, log: log})
}

type budgetCollector struct {
	src BudgetSource
	now func() time.Time
	log *slog.Logger
}

func (budgetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- budgetsDesc
	ch <- budgetsOver80Desc
	ch <- budgetsExhaustedDesc
}

func (c budgetCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), BudgetReadTimeout)
	defer cancel()
	gauges, err := c.src.BudgetGauges(ctx, c.now())
	if err != nil {
		c.log.Warn("reading the budgets for the metrics failed", "err", err)
		return
	}
	for _, g := range gauges {
		for _, v := range [...]struct {
			desc *prometheus.Desc
			n    int64
		}{{budgetsDesc, g.Budgets}, {budgetsOver80Desc, g.Over80}, {budgetsExhaustedDesc, g.Exhausted}} {
			ch <- prometheus.MustNewConstMetric(v.desc, prometheus.GaugeValue, float64(v.n), g.Scope, g.Period)
		}
	}
}
