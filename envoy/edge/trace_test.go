package edge

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tollgate/tollgate/health"
)

// One request makes one server span that continues the client's trace,
// with a child for the key check and one per attempt; the provider gets
// the attempt's trace context as traceparent.
func TestARequestIsOneTraceWithAChildPerAttempt(t *testing.T) {
	var mu sync.Mutex
	var seen []string // traceparent headers the providers received
	record := func(r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r.Header.Get("Traceparent"))
	}
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer dead.Close()
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		record(r)
		_, _ = io.WriteString(w, "answer")
	}))
	defer good.Close()
	ep := func(s *httptest.Server, dep string, prio int) Endpoint {
		e := newProvider(t, 200).endpoint(t, dep, prio)
		e.Base.Host = strings.TrimPrefix(s.URL, "http://")
		return e
	}

	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	proc := &fakeExtProc{translate: map[int]int{}, local: map[string]bool{}}
	eps := []Endpoint{ep(dead, "m#p0/a", 0), ep(good, "m#p1/b", 1)}
	e := New(Options{
		Authz: allowAll{}, ExtProc: proc,
		Clusters: func() map[string]Cluster {
			return map[string]Cluster{"c": {Name: "c", Endpoints: eps, RequestTimeout: time.Minute}}
		},
		MaxBodyBytes: func() int { return 1 << 20 },
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Health:       health.New(health.Options{}),
		Tracer:       tp,
		Rand:         func(int) int { return 0 },
	})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	rec := httptest.NewRecorder()
	e.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)

	spans := exp.GetSpans()
	byName := map[string][]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
		assert.Equal(t, traceID, s.SpanContext.TraceID().String(), "%s continues the client's trace", s.Name)
	}
	require.Len(t, byName["POST /v1/chat/completions"], 1)
	root := byName["POST /v1/chat/completions"][0]
	assert.Equal(t, "00f067aa0ba902b7", root.Parent.SpanID().String(), "the client's span is the parent")
	require.Len(t, byName["ext_authz Check"], 1)
	assert.Equal(t, root.SpanContext.SpanID(), byName["ext_authz Check"][0].Parent.SpanID())
	attempts := byName["upstream attempt"]
	require.Len(t, attempts, 2, "one span per attempt")
	for _, a := range attempts {
		assert.Equal(t, root.SpanContext.SpanID(), a.Parent.SpanID())
	}
	attrs := map[string]string{}
	for _, kv := range root.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	assert.Equal(t, "200", attrs["http.response.status_code"])
	assert.NotEmpty(t, attrs["tollgate.request_id"])

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2)
	for i, tp := range seen {
		assert.Contains(t, tp, traceID, "the provider gets the trace context")
		assert.Contains(t, tp, attempts[i].SpanContext.SpanID().String(), "the attempt's own span")
	}
}
