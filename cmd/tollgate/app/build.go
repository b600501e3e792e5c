package app

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/admission"
	"github.com/tollgate/tollgate/authz"
	"github.com/tollgate/tollgate/balance"
	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/edge"
	"github.com/tollgate/tollgate/extproc"
	"github.com/tollgate/tollgate/health"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/tracing"
	"github.com/tollgate/tollgate/usagelog"
)

// buildLogs makes the server's log and the access log. Two loggers share
// Stderr: one write at a time. The access log's lines go out in batches
// (see lineBuffer), the last ones when everything else has stopped.
func (a *App) buildLogs(context.Context) error {
	stderr := &lockedWriter{w: a.opt.Stderr}
	a.log = newLogger(stderr, a.opt.LogFormat, a.opt.LogLevel)
	accessOut := newLineBuffer(stderr, accessFlushInterval)
	a.onClose(accessOut.Close)
	a.accessLog = newLogger(accessOut, a.opt.LogFormat, a.opt.LogLevel)
	return nil
}

// loadConfig reads the configuration file; watchConfig follows it. The
// routing table follows once its demo providers have their address
// (buildDemo).
func (a *App) loadConfig(context.Context) error {
	cfg, err := config.Load(a.opt.ConfigPath)
	if err != nil {
		return err
	}
	a.cfg.Store(cfg)
	return nil
}

// openStorage opens the database and the key and account cache. Where the
// database has a change feed (PostgreSQL LISTEN/NOTIFY) every replica
// hears of key and account changes at once, so the cache may live long;
// where it has none (SQLite, changed by the CLI from another process) a
// short TTL is the backstop.
func (a *App) openStorage(ctx context.Context) error {
	st, err := store.Open(ctx, a.opt.DB)
	if err != nil {
		return err
	}
	a.st = st
	a.onClose(st.Close)
	a.onClose(func() { // the feed and the sweeps end before the database closes
		a.stopBackground()
		a.wg.Wait()
	})
	feed := st.HasChangeFeed()
	ttl := cacheTTL(a.opt.CacheTTL, feed)
	a.cache = store.NewCache(st, ttl, time.Now)
	// Spend budgets are held like balances, from leases in memory; their
	// budgets are cached like keys.
	a.budgets = budget.New(budget.Options{Source: st, TTL: ttl, Logger: a.log})
	if !feed {
		a.log.Info("no change feed in this database; caches expire after", "ttl", ttl)
		return nil
	}
	a.goBackground(func(ctx context.Context) {
		err := st.Subscribe(ctx, func(c store.Change) {
			applyChange(a.cache, c)
			a.budgets.Changed(c)
		})
		if ctx.Err() == nil {
			a.log.Error("store change feed ended; caches expire after", "ttl", ttl, "err", err)
		}
	})
	return nil
}

// cacheTTL is --cache-ttl, or its default: 30 s where changes are
// announced at once, 1 s where they are not.
func cacheTTL(flag time.Duration, feed bool) time.Duration {
	switch {
	case flag > 0:
		return flag
	case feed:
		return 30 * time.Second
	}
	return time.Second
}

// applyChange drops what a change made stale.
func applyChange(c *store.Cache, ch store.Change) {
	switch ch.Kind {
	case store.ChangeKey:
		c.InvalidateKey(ch.ID)
	case store.ChangeAccount:
		c.InvalidateAccount(ch.ID)
	default:
		c.Purge()
	}
}

// buildLimiter is the in-memory rate limiter, or with --redis one shared
// by the replicas: permits are claimed from Redis in batches and most
// checks answered from the ones in hand, and memory answers while Redis
// does not. The unused permits go back when idle and at the end, before
// the client closes.
func (a *App) buildLimiter(context.Context) error {
	if a.opt.RateLimitClock == nil {
		a.opt.RateLimitClock = time.Now
	}
	a.limiter = ratelimit.NewMemory()
	if a.opt.RedisURL == "" {
		return nil
	}
	rc, err := ratelimit.NewRedisClient(a.opt.RedisURL, a.opt.RedisTimeout)
	if err != nil {
		return fmt.Errorf("--redis: %w", err)
	}
	ratelimit.QuietRedisLogs()
	a.onClose(func() { _ = rc.Close() })
	leased := ratelimit.NewLeased(ratelimit.NewRedis(rc, ratelimit.RedisOptions{}), ratelimit.LeaseOptions{Logger: a.log, Now: a.opt.RateLimitClock})
	a.onClose(leased.Close)
	a.fallback = ratelimit.NewFallback(leased, ratelimit.NewMemory(), a.log,
		ratelimit.WithPrimaryTimeout(a.opt.RedisTimeout))
	a.limiter = a.fallback
	return nil
}

// buildObservability sets up the metrics and tracing (OTEL_* variables).
func (a *App) buildObservability(ctx context.Context) error {
	a.metrics = metrics.New()
	tracer, stopTracing, err := tracing.Setup(ctx, os.LookupEnv)
	if err != nil {
		return err
	}
	a.tracer = tracer
	a.onClose(func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			a.log.Warn("flushing traces failed", "err", err)
		}
	})
	return nil
}

// buildUsage replays the usage journal, then starts the usage recorder,
// the last-used times, the balance leases (holds are served from this
// replica's leases, in memory) and the sweeps of what expires.
func (a *App) buildUsage(ctx context.Context) error {
	a.journal = journalPath(a.opt)
	if n, err := usagelog.ReplayJournal(ctx, a.st, a.journal); err != nil {
		return err
	} else if n > 0 {
		a.log.Info("usage journal replayed", "records", n, "journal", a.journal)
	}
	a.recorder = usagelog.NewRecorder(a.st, usagelog.RecorderOptions{
		Journal: a.journal,
		Logger:  a.log,
		OnWritten: func(ids []string) {
			for _, id := range ids {
				a.cache.BalanceChanged(id)
			}
		},
	})
	a.lastUsed = authz.NewLastUsed(a.st, time.Second, a.log)
	a.refusals = refusal.New(a.st, refusal.Options{Interval: time.Second, Model: a.configuredModel, Logger: a.log})
	a.leaser = balance.New(balance.Options{Store: a.st, Logger: a.log})
	a.sweepEveryMinute("expired balance holds", func(ctx context.Context, now time.Time) (int64, error) {
		n, err := a.st.ReleaseExpired(ctx, now)
		return int64(n), err
	})
	a.sweepEveryMinute("expired dashboard sessions", a.st.DeleteExpiredSessions)
	a.sweepEveryMinute("expired stored responses", a.st.DeleteExpiredResponses)
	a.sweepEveryMinute("expired webhook test pings", a.st.DeleteExpiredPings)
	return nil
}

// journalPath is --journal, or its default: beside a SQLite database, else
// in the working directory.
func journalPath(o Options) string {
	if o.Journal != "" {
		return o.Journal
	}
	if rest, ok := strings.CutPrefix(o.DB, "sqlite://"); ok {
		path, _, _ := strings.Cut(rest, "?")
		if path != "" {
			return path + ".usage-journal"
		}
	}
	return "tollgate-usage.journal"
}

// sweepEveryMinute runs sweep once a minute in the background, logging
// what it removed: balance holds no usage record settled (their replica
// died mid-request), dashboard sessions and stored responses past their
// expiry.
func (a *App) sweepEveryMinute(what string, sweep func(context.Context, time.Time) (int64, error)) {
	a.goBackground(func(ctx context.Context) {
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-tick.C:
				n, err := sweep(ctx, now)
				if err != nil {
					a.log.Warn("removing "+what+" failed", "err", err)
				} else if n > 0 {
					a.log.Info("removed "+what, "count", n)
				}
			}
		}
	})
}

// buildHealth makes the passive health of deployments, one for the
// edge's failover, admission, /v1/models, the dashboard and Envoy's
// clusters: a circuit that opens or closes wakes the xDS push (which
// buildGRPC wires when there is an Envoy to tell).
func (a *App) buildHealth(context.Context) error {
	a.grpc.healthChanged = func() {}
	a.deployments = health.New(health.Options{Now: a.opt.HealthClock, OnChange: func(string) { a.grpc.healthChanged() }})
	return nil
}

// buildServers makes ext_authz and ext_proc, and registers them on the
// gRPC server for Envoy when there is one. The key the router step signs
// what it hands the upstream step with, and ext_authz its decisions, is
// one for every replica (Envoy may send a request's Check and its steps
// to different ones), decided by the first to start.
func (a *App) buildServers(ctx context.Context) error {
	candidate := make([]byte, 32)
	if _, err := rand.Read(candidate); err != nil {
		return fmt.Errorf("step key: %w", err)
	}
	stepKey, err := a.st.SharedSecret(ctx, "ext_proc step key", candidate)
	if err != nil {
		return err
	}
	m := a.metrics
	a.gate = admission.New(a.opt.MaxInFlight)
	m.Gauge("tollgate_inflight_requests", "Requests this replica is serving (open ext_proc steps), which --max-in-flight bounds.",
		func() float64 { return float64(a.gate.InFlight()) })
	m.Counter("tollgate_overload_refusals_total", "New requests refused with 503 because the replica was serving --max-in-flight requests.",
		func() float64 { return float64(a.gate.Refused()) })
	a.authz = metrics.Authz{Next: authz.New(authz.Options{
		Admission: a.gate,
		Keys:      a.cache, Limiter: clockedLimiter{a.limiter, a.opt.RateLimitClock}, Config: a.cfg.Load, Toucher: a.lastUsed, Logger: a.log,
		Refusals: a.refusals, Spare: a.leaser.Spare, DecisionKey: stepKey,
	}), Metrics: m}
	a.extproc = extproc.New(extproc.Options{
		Config: a.cfg.Load, InFlight: a.gate, Keys: a.cache, Balance: a.leaser, Budgets: a.budgets, BudgetRefused: m.BudgetRefused, Logger: a.log,
		// Every refusal before admission: counted in the metrics, logged
		// as the request's access-log line, then counted for its key.
		Refusals: metrics.Refusals{Next: usagelog.RefusalAccessLog{Refusals: a.refusals, Logger: a.accessLog}, Metrics: m},
		// Every usage record: counted in the metrics, logged as the
		// request's access-log line, then written.
		Usage:  metrics.Usage{Next: usagelog.AccessLog{Usage: a.recorder, Logger: a.accessLog}, Metrics: m},
		Health: a.deployments, StepKey: stepKey, Observer: metrics.ExtProc{Metrics: m},
		Responses: a.st,
		// Token limits count in the requests' limiter, on its clock.
		Tokens: a.tokens(), TokenClock: a.opt.RateLimitClock,
	})
	a.registerGRPC()
	return nil
}

// watchConfig reloads the configuration when its file changes: the
// servers read it per request, the edge's routing table and Envoy's
// clusters (xDS) follow. A bad new file is logged and the running one
// kept.
func (a *App) watchConfig(ctx context.Context) {
	err := config.Watch(ctx, a.opt.ConfigPath, os.LookupEnv, func(next *config.Config) {
		a.placeDemo(next)
		if err := a.grpc.xdsUpdate(ctx, next); err != nil {
			a.log.Error("configuration change not applied", "err", err)
			return
		}
		a.cfg.Store(next)
		table := edge.Clusters(next)
		a.clusters.Store(&table)
		a.log.Info("configuration applied", "models", len(next.Models), "providers", len(next.Providers))
	}, func(err error) {
		a.log.Error("configuration change rejected; keeping the running one", "err", err)
	})
	if err != nil {
		a.log.Error("not watching the configuration file", "err", err)
	}
}

// tokens is the limiter as a token limiter (every limiter buildLimiter
// makes is one).
func (a *App) tokens() ratelimit.TokenLimiter {
	t, _ := a.limiter.(ratelimit.TokenLimiter)
	return t
}

// clockedLimiter counts every request at the time its own clock reads
// (Options.RateLimitClock), whatever the caller says.
type clockedLimiter struct {
	next ratelimit.Limiter
	now  func() time.Time
}

func (c clockedLimiter) Allow(ctx context.Context, key string, limit int, _ time.Time) (ratelimit.Result, error) {
	return c.next.Allow(ctx, key, limit, c.now())
}

// configuredModel is the id of the model of the configuration in force
// that asked names, for the refusal counters (which count any other name
// as an unknown model).
func (a *App) configuredModel(asked string) (string, bool) {
	cfg := a.cfg.Load()
	if cfg == nil {
		return "", false
	}
	m, ok := cfg.Model(asked)
	if !ok {
		return "", false
	}
	return m.ID, true
}
