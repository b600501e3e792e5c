// Package metrics is Tollgate's Prometheus instrumentation: what requests
// cost and how they ended (fed by the usage records, one per request),
// denials at the key check, the health of each deployment, and the state
// of the database, Redis and the usage recorder. Names follow the
// OpenTelemetry GenAI semantic conventions where one exists
// (gen_ai_server_request_duration_seconds, gen_ai_client_token_usage,
// gen_ai_server_time_to_first_token_seconds, labels gen_ai_request_model and
// gen_ai_provider_name) and are tollgate_* otherwise. Key and account ids
// are never labels: per-key figures live in the store.
package metrics

import (
	"context"
	"strconv"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

// Label names.
const (
	labelModel    = "gen_ai_request_model"
	labelProvider = "gen_ai_provider_name"
	labelStatus   = "status"
	labelCode     = "error_code"
	labelToken    = "gen_ai_token_type"
	labelStreamed = "streamed"
	labelStep     = "step"
	labelEndpoint = "endpoint"
)

// Metrics holds the registry and the instruments.
type Metrics struct {
	Registry *prometheus.Registry

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	tokens      *prometheus.HistogramVec
	cost        *prometheus.CounterVec
	attempts    *prometheus.CounterVec
	failovers   *prometheus.CounterVec
	denials     *prometheus.CounterVec
	checks      prometheus.Counter
	streams     *prometheus.CounterVec
	messages    *prometheus.CounterVec
	overcharges *prometheus.CounterVec
	// budgetRefusals: budgets.go.
	budgetRefusals *prometheus.CounterVec
}

// New makes the instruments and registers them, with Go's runtime and
// process collectors.
func New() *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry()}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_requests_total",
		Help: "Admitted requests, by endpoint, model, provider, final status, error code (empty on success) and whether they streamed.",
	}, []string{labelEndpoint, labelModel, labelProvider, labelStatus, labelCode, labelStreamed})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_server_request_duration_seconds",
		Help:    "Time from admission to the end of the answer.",
		Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 320},
	}, []string{labelModel, labelProvider, labelStatus})
	m.ttft = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_server_time_to_first_token_seconds",
		Help:    "Time from admission to the first byte of the answer passed to the client.",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	}, []string{labelModel, labelProvider})
	m.tokens = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "gen_ai_client_token_usage",
		Help:    "Tokens per request, by type (input, output).",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10),
	}, []string{labelModel, labelProvider, labelToken})
	m.cost = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_cost_usd_total",
		Help: "Money charged, in US dollars.",
	}, []string{labelModel, labelProvider})
	m.attempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_upstream_attempts_total",
		Help: "Upstream attempts made, over all requests.",
	}, []string{labelModel})
	m.failovers = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_failovers_total",
		Help: "Attempts after the first: a deployment failed and the next one was tried.",
	}, []string{labelModel})
	m.denials = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_denials_total",
		Help: "Requests refused at the key check, by status and code (invalid key, IP, rate limit, balance).",
	}, []string{labelStatus, labelCode})
	m.checks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tollgate_authz_checks_total",
		Help: "ext_authz Check calls answered.",
	})
	m.streams = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_extproc_streams_total",
		Help: "ext_proc streams opened, by step (router, upstream: one per attempt).",
	}, []string{labelStep})
	m.messages = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_extproc_messages_total",
		Help: "ext_proc messages processed (each answered with one), by step.",
	}, []string{labelStep})
	m.overcharges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tollgate_overcharges_total",
		Help: "Requests charged more than they held (a provider billed beyond the limit it was sent); each is logged with its request id.",
	}, []string{labelModel, labelProvider})
	m.Registry.MustRegister(m.requests, m.duration, m.ttft, m.tokens, m.cost, m.attempts, m.failovers, m.denials,
		m.checks, m.streams, m.messages, m.overcharges,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		panicCollector{})
	m.budgetRefusals = newBudgetRefusals(m.Registry)
	return m
}

// panicsDesc is tollgate_panics_total: the panics recovered at a request's
// or a stream's boundary (guard), read at scrape time.
var panicsDesc = prometheus.NewDesc("tollgate_panics_total",
	"Panics recovered at a request's or a stream's boundary, by boundary (each answered with an internal error; a bug to report).",
	[]string{"where"}, nil)

type panicCollector struct{}

func (panicCollector) Describe(ch chan<- *prometheus.Desc) { ch <- panicsDesc }

func (panicCollector) Collect(ch chan<- prometheus.Metric) {
	for _, c := range guard.Counts() {
		ch <- prometheus.MustNewConstMetric(panicsDesc, prometheus.CounterValue, float64(c.N), c.Where)
	}
}

// Observe counts one usage record.
func (m *Metrics) Observe(rec store.UsageRecord) {
	st := strconv.Itoa(rec.Status)
	endpoint := rec.Endpoint
	if endpoint == "" {
		endpoint = store.EndpointChat
	}
	m.requests.WithLabelValues(endpoint, rec.Model, rec.Provider, st, rec.ErrorCode, strconv.FormatBool(rec.Streamed)).Inc()
	m.duration.WithLabelValues(rec.Model, rec.Provider, st).Observe(rec.Latency.Seconds())
	if rec.TTFT > 0 {
		m.ttft.WithLabelValues(rec.Model, rec.Provider).Observe(rec.TTFT.Seconds())
	}
	if rec.PromptTokens > 0 || rec.CompletionTokens > 0 {
		m.tokens.WithLabelValues(rec.Model, rec.Provider, "input").Observe(float64(rec.PromptTokens))
		m.tokens.WithLabelValues(rec.Model, rec.Provider, "output").Observe(float64(rec.CompletionTokens))
	}
	if rec.Cost > 0 {
		m.cost.WithLabelValues(rec.Model, rec.Provider).Add(float64(rec.Cost) / float64(money.PerDollar))
	}
	if rec.Attempts > 0 {
		m.attempts.WithLabelValues(rec.Model).Add(float64(rec.Attempts))
		if rec.Attempts > 1 {
			m.failovers.WithLabelValues(rec.Model).Add(float64(rec.Attempts - 1))
		}
	}
}

// Usage is a usage sink (extproc.Usage) that observes every record and
// passes it on.
type Usage struct {
	Next interface {
		Record(store.UsageRecord) error
	}
	Metrics *Metrics
}

// Record observes rec and hands it on.
func (u Usage) Record(rec store.UsageRecord) error {
	u.Metrics.Observe(rec)
	return u.Next.Record(rec)
}

// Refusals is a refusal sink (refusal.Sink) that counts each refusal of
// the router step in the requests metric, as its usage record did (model
// and provider unknown: the model asked for is the client's text), and
// passes it on.
type Refusals struct {
	Next    refusal.Sink
	Metrics *Metrics
}

// Count counts r and passes it on.
func (r Refusals) Count(x refusal.Refusal) {
	endpoint := x.Endpoint
	if !store.KnownEndpoint(endpoint) {
		endpoint = ""
	}
	r.Metrics.requests.WithLabelValues(endpoint, "", "", strconv.Itoa(x.Status), x.Code, "false").Inc()
	r.Next.Count(x)
}

// Authz wraps an ext_authz server and counts its denials by status and
// the OpenAI error code of their body.
type Authz struct {
	authv3.UnimplementedAuthorizationServer
	Next    authv3.AuthorizationServer
	Metrics *Metrics
}

// Check calls Next and counts a denial.
func (a Authz) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	resp, err := a.Next.Check(ctx, req)
	a.Metrics.checks.Inc()
	if d := resp.GetDeniedResponse(); err == nil && d != nil {
		code := gjson.Get(d.GetBody(), "error.code").String()
		a.Metrics.denials.WithLabelValues(strconv.Itoa(int(d.GetStatus().GetCode())), code).Inc()
	}
	return resp, err
}

// ExtProc counts ext_proc streams and messages by step (extproc.Observer).
type ExtProc struct{ Metrics *Metrics }

// Stream counts a stream of step.
func (e ExtProc) Stream(step string) { e.Metrics.streams.WithLabelValues(step).Inc() }

// Message counts a message of step.
func (e ExtProc) Message(step string) { e.Metrics.messages.WithLabelValues(step).Inc() }

// Overcharge counts a request charged more than it held.
func (e ExtProc) Overcharge(model, provider string) {
	e.Metrics.overcharges.WithLabelValues(model, provider).Inc()
}

// Gauge registers a gauge read at scrape time.
func (m *Metrics) Gauge(name, help string, read func() float64) {
	m.Registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, read))
}

// Counter registers a counter read at scrape time (read never decreases).
func (m *Metrics) Counter(name, help string, read func() float64) {
	m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, read))
}

// Deployments registers tollgate_deployment_up: 1 for each deployment of
// an enabled provider that takes requests, 0 for one ejected (its circuit
// open). list returns the deployments in force at scrape time.
func (m *Metrics) Deployments(list func() []Deployment) {
	m.Registry.MustRegister(deploymentCollector{list: list})
}

// Deployment is one deployment's state, as Deployments reports it.
type Deployment struct {
	ID, Model, Provider string
	Up                  bool
}

var deploymentDesc = prometheus.NewDesc("tollgate_deployment_up",
	"1 when the deployment takes requests, 0 when its circuit is open (ejected).",
	[]string{"deployment", labelModel, labelProvider}, nil)

type deploymentCollector struct{ list func() []Deployment }

func (deploymentCollector) Describe(ch chan<- *prometheus.Desc) { ch <- deploymentDesc }

func (c deploymentCollector) Collect(ch chan<- prometheus.Metric) {
	for _, d := range c.list() {
		v := 0.0
		if d.Up {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(deploymentDesc, prometheus.GaugeValue, v, d.ID, d.Model, d.Provider)
	}
}
