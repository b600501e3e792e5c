package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

func lookup(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestTracingIsOffWithoutAnEndpointAndOnWithOne(t *testing.T) {
	tp, stop, err := Setup(context.Background(), lookup(nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := tp.(noop.TracerProvider); !ok {
		t.Errorf("no endpoint: got %T, want the no-op provider", tp)
	}
	if err := stop(context.Background()); err != nil {
		t.Error(err)
	}

	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(name, "http://127.0.0.1:1") // the exporter reads the environment itself
		tp, stop, err := Setup(context.Background(), lookup(map[string]string{name: "http://127.0.0.1:1"}))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := tp.(*sdktrace.TracerProvider); !ok {
			t.Errorf("%s set: got %T, want the SDK provider", name, tp)
		}
		if err := stop(context.Background()); err != nil {
			t.Errorf("stopping with nothing to export: %v", err)
		}
	}
}
