package metrics

import (
	"context"
	"log/slog"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
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

// denyAll is an ext_authz server that denies every request with 429.
type denyAll struct {
	authv3.UnimplementedAuthorizationServer
}

func (denyAll) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return &authv3.CheckResponse{HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
		Status: &typev3.HttpStatus{Code: typev3.StatusCode_TooManyRequests},
		Body:   `{"error":{"code":"rate_limit_exceeded"}}`,
	}}}, nil
}

type nopSink struct{}

func (nopSink) Count(refusal.Refusal) {}

// TestNoMetricIsLabelledByKeyOrAccount: with every instrument fed (a usage
// record, a refusal, a denial, ext_proc traffic, a budget refusal, the
// scrape-time gauges), no series of the registry has a label naming a key
// or an account: their number would grow with the keys.
func TestNoMetricIsLabelledByKeyOrAccount(t *testing.T) {
	m := New()
	m.Deployments(func() []Deployment {
		return []Deployment{{ID: "gpt-4o#openai/gpt-4o", Model: "gpt-4o", Provider: "openai", Up: true}}
	})
	m.Budgets(&countingBudgets{budgets: 3}, time.Now, slog.New(slog.DiscardHandler))
	m.Gauge("tollgate_test_gauge", "A gauge.", func() float64 { return 1 })
	m.Observe(store.UsageRecord{KeyID: "key_1", AccountID: "acct_1", Model: "gpt-4o", Provider: "openai", Status: 200,
		PromptTokens: 1, CompletionTokens: 1, Cost: 5, Attempts: 2, TTFT: time.Millisecond, Latency: time.Second})
	Refusals{Next: nopSink{}, Metrics: m}.Count(refusal.Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 403, Code: "model_not_allowed"})
	_, err := Authz{Next: denyAll{}, Metrics: m}.Check(t.Context(), &authv3.CheckRequest{})
	require.NoError(t, err)
	e := ExtProc{Metrics: m}
	e.Stream("router")
	e.Message("router")
	e.Overcharge("gpt-4o", "openai")
	m.BudgetRefused("key", "day")

	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				assert.NotContains(t, []string{"key_id", "account_id", "key", "account"}, l.GetName(), "%s is labelled by %s", f.GetName(), l.GetName())
			}
		}
	}
	for _, fed := range []string{"tollgate_requests_total", "tollgate_denials_total", "tollgate_overcharges_total",
		"tollgate_budgets", "tollgate_budget_refusals_total", "tollgate_deployment_up", "gen_ai_client_token_usage"} {
		assert.True(t, names[fed], "%s has series: the walk saw it", fed)
	}
}

// TestRequestsAreCountedByEndpoint: a record counts under its endpoint;
// one that names none is chat's (older records and journals).
func TestRequestsAreCountedByEndpoint(t *testing.T) {
	m := New()
	m.Observe(store.UsageRecord{Model: "embed", Provider: "openai", Status: 200, Endpoint: store.EndpointEmbeddings})
	m.Observe(store.UsageRecord{Model: "gpt-4o", Provider: "openai", Status: 200})
	Refusals{Next: nopSink{}, Metrics: m}.Count(refusal.Refusal{KeyID: "key_1", Status: 429, Code: "rate_limit_exceeded", Endpoint: "rerank"})
	fams, err := m.Registry.Gather()
	require.NoError(t, err)
	counted := map[string]string{}
	for _, f := range fams {
		if f.GetName() != "tollgate_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range s.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			counted[labels["gen_ai_request_model"]] = labels["endpoint"]
		}
	}
	assert.Equal(t, map[string]string{"embed": "embeddings", "gpt-4o": "chat", "": "rerank"}, counted, "a refusal names no model")
}
