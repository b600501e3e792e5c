package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tollgate/tollgate/internal/guard"
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

// buildAdmin registers the gauges read at scrape time and opens the admin
// listener (--admin-listen), when asked for.
func (a *App) buildAdmin(context.Context) error {
	a.registerGauges()
	a.ready = &readiness{ping: a.st.Ping}
	if f := a.fallback; f != nil {
		a.ready.redis = func() string {
			if f.Stats().Down {
				return "down (rate limits per replica, from memory)"
			}
			return "up"
		}
	}
	if a.opt.AdminListen == "" {
		return nil
	}
	lis, err := net.Listen("tcp", a.opt.AdminListen)
	if err != nil {
		return fmt.Errorf("--admin-listen: %w", err)
	}
	a.adminLis = lis
	a.adminServer = &http.Server{Handler: guard.Handler("admin", a.log, adminHandler(a.metrics, a.ready)),
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	a.onClose(func() {
		_ = a.adminServer.Close()
		_ = lis.Close()
	})
	return nil
}

// registerGauges reads, at scrape time, the health of every deployment,
// the budgets (counted by scope and period, one query), the usage
// recorder's queue and journal, the database and Redis.
func (a *App) registerGauges() {
	m := a.metrics
	m.Deployments(a.deploymentStates)
	m.Budgets(a.st, time.Now, a.log)
	m.Gauge("tollgate_usage_queue_length", "Usage records waiting in memory to be written.", func() float64 { return float64(a.recorder.Len()) })
	m.Gauge("tollgate_usage_journal_bytes", "Size of the usage journal (records the database could not take, replayed at the next start).", func() float64 {
		st, err := os.Stat(a.journal)
		if err != nil {
			return 0
		}
		return float64(st.Size())
	})
	m.Gauge("tollgate_database_up", "1 when the database answers a query within a second, 0 otherwise (checked at scrape time).", func() float64 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if a.st.Ping(ctx) != nil {
			return 0
		}
		return 1
	})
	if f := a.fallback; f != nil {
		m.Gauge("tollgate_redis_up", "1 when the rate limiter reaches Redis, 0 when it answers from memory.", func() float64 {
			if f.Stats().Down {
				return 0
			}
			return 1
		})
	}
}

// deploymentStates is every enabled deployment and whether it is up.
func (a *App) deploymentStates() []metrics.Deployment {
	c := a.cfg.Load()
	var out []metrics.Deployment
	for i := range c.Models {
		for _, d := range c.Models[i].Deployments {
			if p, ok := c.Provider(d.Provider); !ok || !p.IsEnabled() {
				continue
			}
			out = append(out, metrics.Deployment{ID: d.ID, Model: c.Models[i].ID, Provider: d.Provider, Up: a.deployments.Available(d.ID)})
		}
	}
	return out
}
