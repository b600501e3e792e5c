package edge

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Tracing: one span per request (a server span, continuing the client's
// W3C trace context), with a child span for the key check and one per
// upstream attempt, whose context travels to the provider as traceparent.
// No prompt or completion text is ever an attribute.

// Attribute keys, after the OpenTelemetry GenAI conventions where one
// exists.
const (
	attrModel      = attribute.Key("gen_ai.request.model")
	attrProvider   = attribute.Key("gen_ai.provider.name")
	attrRequestID  = attribute.Key("tollgate.request_id")
	attrDeployment = attribute.Key("tollgate.deployment")
	attrAttempt    = attribute.Key("tollgate.attempt")
	attrStatus     = attribute.Key("http.response.status_code")
)

var traceContext = propagation.TraceContext{}

const tracerName = "github.com/tollgate/tollgate/envoy/edge"

// startRequest starts the request's span from the client's trace context.
func (e *Edge) startRequest(r *http.Request, requestID string) (context.Context, trace.Span) {
	if !e.tracing {
		return r.Context(), noSpan
	}
	ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return e.tracer.Start(ctx, r.Method+" "+r.URL.Path, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path),
			attrRequestID.String(requestID)))
}

// noSpan is the span of every step when nothing records them.
var noSpan = trace.SpanFromContext(context.Background())

// startSpan starts a child span of the request's, when spans are recorded.
func (e *Edge) startSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	if !e.tracing {
		return ctx, noSpan
	}
	return e.tracer.Start(ctx, name)
}

// endRequest records the status the client got and ends the span.
func endRequest(span trace.Span, status int) {
	if !span.IsRecording() {
		return // nothing to set (and the attributes would be made for nothing)
	}
	span.SetAttributes(attrStatus.Int(status))
	if status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	span.End()
}

// startAttempt starts an attempt's span and puts its context in the
// request's headers (traceparent), which the provider receives.
func (e *Edge) startAttempt(ctx context.Context, ep Endpoint, n int, h headers) (context.Context, trace.Span) {
	if !e.tracing {
		return ctx, noSpan // the client's traceparent, if any, goes on
	}
	ctx, span := e.tracer.Start(ctx, "upstream attempt", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrDeployment.String(ep.Deployment), attrProvider.String(providerOf(ep.Deployment)), attrAttempt.Int(n)))
	delete(h, "traceparent")
	delete(h, "tracestate")
	traceContext.Inject(ctx, mapCarrier(h))
	return ctx, span
}

// providerOf reads the provider's name from a deployment id
// (model#provider/provider-model).
func providerOf(deployment string) string {
	_, rest, _ := strings.Cut(deployment, "#")
	p, _, _ := strings.Cut(rest, "/")
	return p
}

// mapCarrier lets the propagator write into a header map.
type mapCarrier headers

func (c mapCarrier) Get(k string) string { return c[strings.ToLower(k)] }
func (c mapCarrier) Set(k, v string)     { c[strings.ToLower(k)] = v }
func (c mapCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

// statusWriter remembers the status written, for the request's span.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError flushes and says whether the bytes reached the connection
// (http.ResponseController's Flush uses it).
func (w *statusWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection (write
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
