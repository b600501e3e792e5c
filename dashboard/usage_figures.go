package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// usageFigures are a key's or an account's figures over one window, the
// same on both usage pages: every figure follows the window.
type usageFigures struct {
	// Requests are all of them: answered, failed (a usage record with an
	// error) and refused (counted, not recorded: docs/dashboard.md).
	Requests, Answered, Failed, Refused string
	// ErrorRate is (failed + refused) / (answered + failed + refused).
	ErrorRate                      string
	Cost                           string
	PromptTokens, CompletionTokens string
	// TokenDetail names the cached, cache-write and reasoning tokens among
	// them ("" when none).
	TokenDetail              string
	ByModel                  []modelUsageRow
	ByEndpoint               []endpointUsageRow
	Errors                   []errorRow
	RequestsChart, CostChart chart
	Buckets                  []bucketRow
	// sum is the records' summary (for the account page's top models).
	sum store.UsageSummary
}

// modelUsageRow is one model's line of the usage table.
type modelUsageRow struct {
	Model            string
	Requests         string
	Refused          string
	PromptTokens     string
	CompletionTokens string
	Cost             string
	cost             money.Nanos
}

// errorRow is one status and code of the errors table.
type errorRow struct {
	Status          int
	Code            string
	Failed, Refused string
	total           int64
}

// Names of the models of records and refusals that name none.
const (
	noModelRecorded = "(none)"
	noModelRefused  = "(not read: refused before the body)"
)

// usageFigures reads q's figures over win.
func (d *Dashboard) usageFigures(ctx context.Context, a manage.Actor, q manage.UsageRequest, win timelineWindow) (usageFigures, error) {
	sum, err := d.manage.Summary(ctx, a, q)
	if err != nil {
		return usageFigures{}, fmt.Errorf("usage summary: %w", err)
	}
	refused, err := d.manage.RefusalTotals(ctx, a, q)
	if err != nil {
		return usageFigures{}, fmt.Errorf("refusals: %w", err)
	}
	buckets, err := d.manage.Timeline(ctx, a, q, win.step)
	if err != nil {
		return usageFigures{}, fmt.Errorf("usage timeline: %w", err)
	}
	failed, err := d.manage.UsageErrors(ctx, a, q)
	if err != nil {
		return usageFigures{}, fmt.Errorf("usage errors: %w", err)
	}
	var nRefused int64
	for _, r := range refused {
		nRefused += r.Count
	}
	answered := sum.TotalRequests - sum.ErrorRequests
	all := sum.TotalRequests + nRefused
	f := usageFigures{Requests: count(all), Answered: count(answered), Failed: count(sum.ErrorRequests), Refused: count(nRefused),
		ErrorRate: percent(sum.ErrorRequests+nRefused, all), Cost: usd(sum.Cost),
		PromptTokens: count(sum.PromptTokens), CompletionTokens: count(sum.CompletionTokens),
		TokenDetail: tokenDetailLabel(sum.CachedTokens, sum.CacheWriteTokens, sum.ReasoningTokens),
		ByModel:     modelRows(sum.ByModel, refused), ByEndpoint: endpointRows(sum.ByEndpoint), Errors: errorRows(failed, refused), sum: sum}
	f.RequestsChart, f.CostChart, f.Buckets = drawTimeline(win, buckets)
	return f, nil
}

// modelRows are the records' models and the refusals' models asked for,
// by name.
func modelRows(ms []store.ModelUsage, refused []store.RefusalCount) []modelUsageRow {
	type row struct {
		m       store.ModelUsage
		refused int64
	}
	byName := map[string]*row{}
	get := func(name string) *row {
		if byName[name] == nil {
			byName[name] = &row{}
		}
		return byName[name]
	}
	for _, m := range ms {
		name := cmp.Or(m.Model, noModelRecorded)
		get(name).m = m
	}
	for _, r := range refused {
		get(cmp.Or(r.Model, noModelRefused)).refused += r.Count
	}
	out := make([]modelUsageRow, 0, len(byName))
	for name, r := range byName {
		out = append(out, modelUsageRow{Model: name, Requests: count(r.m.Requests + r.refused), Refused: count(r.refused),
			PromptTokens: count(r.m.PromptTokens), CompletionTokens: count(r.m.CompletionTokens), Cost: usd(r.m.Cost), cost: r.m.Cost})
	}
	slices.SortFunc(out, func(a, b modelUsageRow) int { return cmp.Compare(a.Model, b.Model) })
	return out
}

// errorRows are the failures and refusals by status and code, most first.
func errorRows(failed []store.ErrorCount, refused []store.RefusalCount) []errorRow {
	type key struct {
		status int
		code   string
	}
	type tally struct{ failed, refused int64 }
	by := map[key]*tally{}
	get := func(k key) *tally {
		if by[k] == nil {
			by[k] = &tally{}
		}
		return by[k]
	}
	for _, e := range failed {
		get(key{e.Status, e.Code}).failed += e.Count
	}
	for _, r := range refused {
		get(key{r.Status, r.Code}).refused += r.Count
	}
	out := make([]errorRow, 0, len(by))
	for k, t := range by {
		out = append(out, errorRow{Status: k.status, Code: cmp.Or(k.code, "—"), Failed: count(t.failed), Refused: count(t.refused),
			total: t.failed + t.refused})
	}
	slices.SortFunc(out, func(a, b errorRow) int {
		return cmp.Or(cmp.Compare(b.total, a.total), cmp.Compare(a.Status, b.Status), cmp.Compare(a.Code, b.Code))
	})
	return out
}
