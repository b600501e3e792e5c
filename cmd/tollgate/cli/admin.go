package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/metrics"
)

// readiness is what /readyz reports: ready when the configuration is loaded
// (it is, once serving), the database answers, and the server is not
// draining. Redis is reported but does not make the server unready: without
// it, rate limits fall back to memory.
type readiness struct {
	draining atomic.Bool
	ping     func(ctx context.Context) error
	redis    func() string // "up", "down", or "" when not configured
}

// adminHandler serves /metrics, /healthz and /readyz.
func adminHandler(m *metrics.Metrics, r *readiness) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		status := map[string]string{"config": "loaded", "database": "up"}
		ready := true
		if err := r.ping(ctx); err != nil {
			status["database"], ready = "down", false
		}
		if r.redis != nil {
			if s := r.redis(); s != "" {
				status["redis"] = s
			}
		}
		if r.draining.Load() {
			status["draining"], ready = "true", false
		}
		w.Header().Set("Content-Type", "application/json")
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"ready": ready, "checks": status})
	})
	return mux
}
