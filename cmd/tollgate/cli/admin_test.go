package cli

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate/tollgate/metrics"
)

func TestReadinessFollowsTheDatabaseAndTheDrain(t *testing.T) {
	dbErr := error(nil)
	r := &readiness{ping: func(context.Context) error { return dbErr }}
	h := adminHandler(metrics.New(), r)
	status := func(path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code
	}
	if got := status("/readyz"); got != http.StatusOK {
		t.Fatalf("ready: %d", got)
	}
	dbErr = errors.New("connection refused")
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("database down: %d, want 503", got)
	}
	if got := status("/healthz"); got != http.StatusOK {
		t.Errorf("alive while the database is down: %d", got)
	}
	dbErr = nil
	r.draining.Store(true)
	if got := status("/readyz"); got != http.StatusServiceUnavailable {
		t.Errorf("draining: %d, want 503", got)
	}
	if got := status("/metrics"); got != http.StatusOK {
		t.Errorf("/metrics: %d", got)
	}
}

func TestHealthcheckSucceedsOnlyOnA200(t *testing.T) {
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	defer down.Close()
	if err := Run(context.Background(), []string{"healthcheck", ok.URL}, io.Discard, io.Discard); err != nil {
		t.Errorf("a 200: %v", err)
	}
	if err := Run(context.Background(), []string{"healthcheck", down.URL}, io.Discard, io.Discard); err == nil {
		t.Error("a 503 passed")
	}
	if err := Run(context.Background(), []string{"healthcheck"}, io.Discard, io.Discard); !errors.Is(err, ErrUsage) {
		t.Errorf("no URL: %v", err)
	}
}
