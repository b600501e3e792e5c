package app

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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

func TestTheCacheLivesLongOnlyWhereChangesAreAnnounced(t *testing.T) {
	for _, tc := range []struct {
		flag time.Duration
		feed bool
		want time.Duration
	}{
		{0, true, 30 * time.Second},
		{0, false, time.Second},
		{5 * time.Second, true, 5 * time.Second},
		{5 * time.Second, false, 5 * time.Second},
	} {
		if got := cacheTTL(tc.flag, tc.feed); got != tc.want {
			t.Errorf("cacheTTL(%v, feed %v) = %v, want %v", tc.flag, tc.feed, got, tc.want)
		}
	}
}
