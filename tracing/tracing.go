// Package tracing sets up OpenTelemetry traces: on when the standard
// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
// variable names a collector, exported over OTLP/HTTP in batches, with the
// other OTEL_* variables honoured (service name, headers, sampler); off
// otherwise, at no cost: the tracer provider is then a no-op. W3C trace
// context (traceparent, tracestate) is the propagator.
package tracing

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Setup installs the process's tracer provider and propagator from the
// environment (lookup reads a variable) and returns the provider and a
// function that flushes and stops it.
func Setup(ctx context.Context, lookup func(string) (string, bool)) (trace.TracerProvider, func(context.Context) error, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	_, general := lookup("OTEL_EXPORTER_OTLP_ENDPOINT")
	_, traces := lookup("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if !general && !traces {
		tp := noop.NewTracerProvider()
		otel.SetTracerProvider(tp)
		return tp, func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName("tollgate")))
	if err != nil {
		res = resource.Default()
	}
	envRes, err := resource.New(ctx, resource.WithFromEnv())
	if err == nil {
		if merged, err := resource.Merge(res, envRes); err == nil {
			res = merged
		}
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp, tp.Shutdown, nil
}
