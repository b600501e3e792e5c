// Package app is one running Tollgate server (`tollgate serve`). New
// builds its parts from Options, in order: the logs, the configuration,
// storage and its caches, the rate limiter and its Redis leases, usage
// recording and balance leases, the gRPC server for Envoy (with TLS and
// xDS), ext_authz and ext_proc, the alert delivery worker, the built-in
// edge (which answers the demo provider in process; demo.go), the
// dashboard and the management API on the HTTP listener, and the admin
// listener. Run serves
// until its context ends or a listener fails; Shutdown stops everything in
// order: stop accepting, drain in-flight streams, flush usage and
// last-used times, close the database. The command line
// (cmd/tollgate/cli) only turns flags into Options.
//
// It is the top of the house: it imports the concern packages (authz,
// extproc, store, the edge, the dashboard…) and binds them, and it lives
// beside the command, its only user; no package outside cmd/ imports it.
// Where one concern needs another's value (the in-process binding needs
// the ext_proc server's sessions), the adapter is made here, not in the
// concern (bindInProcess).
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

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
	"github.com/tollgate/tollgate/usagelog"
)

// The built-in edge's bindings (Options.Edge).
const (
	EdgeInProcess = "in-process" // it calls the ext_authz and ext_proc code directly
	EdgeGRPC      = "grpc"       // it calls them over a private gRPC connection, as Envoy would
	EdgeOff       = "off"        // behind Envoy: the HTTP listener serves the dashboard only
)

// The log formats (Options.LogFormat).
const (
	LogJSON = "json"
	LogText = "text"
)

// Options are what `tollgate serve` is told; each field is one of its
// flags, named in the comments.
type Options struct {
	ConfigPath     string        // --config
	DB             string        // --db
	RedisURL       string        // --redis; empty: the in-memory limiter
	RedisTimeout   time.Duration // --redis-timeout
	Listen         string        // --listen
	Edge           string        // --edge: EdgeInProcess, EdgeGRPC or EdgeOff
	GRPC           GRPCListen    // --grpc-*
	XFFTrustedHops int           // --xff-trusted-hops
	EnvoyListen    string        // --envoy-listen
	CacheTTL       time.Duration // --cache-ttl; 0: 30 s with a change feed, 1 s without
	Drain          time.Duration // --drain-timeout
	// MaxInFlight (--max-in-flight) is how many requests this replica
	// serves at once; past it new ones get 503 with Retry-After (package
	// admission). 0: no limit.
	MaxInFlight int
	Journal     string     // --journal; empty: see journalPath
	AdminListen string     // --admin-listen; empty: none
	HTTP        HTTPLimits // --http-*
	LogFormat   string     // --log-format: LogJSON or LogText
	LogLevel    slog.Level // --log-level
	// Stdout gets the one line that says where Tollgate serves; Stderr
	// the logs.
	Stdout, Stderr io.Writer
	// RateLimitClock is the clock of the per-key rate-limit windows (and
	// of the return of idle Redis permits); nil: time.Now. Tests set one
	// that starts a fresh window when they need their requests in one.
	RateLimitClock func() time.Time
	// HealthClock is the clock of the deployments' circuits (their
	// cooldowns); nil: time.Now. Tests move it past a cooldown.
	HealthClock func() time.Time
}

// App is a built server: every part it owns, and what closes them.
type App struct {
	opt       Options
	log       *slog.Logger
	accessLog *slog.Logger

	cfg      atomic.Pointer[config.Config]
	clusters atomic.Pointer[map[string]edge.Cluster]

	st       store.Store
	cache    *store.Cache
	limiter  ratelimit.Limiter
	fallback *ratelimit.Fallback // nil without Redis
	metrics  *metrics.Metrics
	tracer   trace.TracerProvider

	journal  string
	recorder *usagelog.Recorder
	lastUsed *authz.LastUsed
	refusals *refusal.Counter
	leaser   *balance.Leaser
	budgets  *budget.Holder
	// alertsKey seals the webhook endpoints' signing secrets.
	alertsKey []byte

	deployments *health.Tracker
	authz       metrics.Authz
	gate        *admission.Gate
	extproc     *extproc.Server
	grpc        grpcParts
	edge        edgeParts
	demo        demoParts

	httpServer  *http.Server
	httpLis     net.Listener
	adminServer *http.Server // nil without --admin-listen
	adminLis    net.Listener
	ready       *readiness

	// background runs the goroutines that live as long as the server
	// (change feed, sweeps, configuration watch); stopBackground ends them
	// and waits.
	background     context.Context
	stopBackground func()
	wg             sync.WaitGroup
	// undo closes what New opened, last first.
	undo []func()
}

// Serve builds a server, runs it until ctx ends or a listener fails, and
// shuts it down.
func Serve(ctx context.Context, opt Options) error {
	a, err := New(ctx, opt)
	if err != nil {
		return err
	}
	runErr := a.Run(ctx)
	a.Shutdown()
	return runErr
}

// New builds every part of the server and opens its listeners; nothing is
// served until Run. The server lives until ctx ends (xDS streams end with
// it). On an error, what was opened is closed again.
func New(ctx context.Context, opt Options) (*App, error) {
	a := &App{opt: opt}
	a.background, a.stopBackground = context.WithCancel(ctx)
	a.onClose(func() {
		a.stopBackground()
		a.wg.Wait()
	})
	for _, step := range []func(context.Context) error{
		a.buildLogs,
		a.loadConfig,
		a.openStorage,
		a.buildDemo,
		a.buildLimiter,
		a.buildObservability,
		a.buildUsage,
		a.buildHealth,
		a.buildGRPC,
		a.buildServers,
		a.buildAlerts,
		a.buildEdge,
		a.buildHTTP,
		a.buildAdmin,
	} {
		if err := step(ctx); err != nil {
			a.closeAll()
			return nil, err
		}
	}
	return a, nil
}

// Run serves until ctx ends (it then returns nil) or a listener fails (it
// returns why). Shutdown must follow either way.
func (a *App) Run(ctx context.Context) error {
	errs := make(chan error, 3)
	a.serveGRPC(errs)
	a.serveDemo()
	go func() {
		err := a.httpServer.Serve(a.opt.HTTP.listener(a.httpLis))
		errs <- fmt.Errorf("edge: %w", err)
	}()
	if a.adminServer != nil {
		go func() { _ = a.adminServer.Serve(a.adminLis) }() // ends when Shutdown closes it
	}
	a.goBackground(a.watchConfig)
	a.announce()
	select {
	case <-ctx.Done():
		return nil
	case err := <-errs:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return err
	}
}

// Shutdown stops the server in order: readiness and gRPC health turn to
// draining, the HTTP listener drains (the edge's streams ended when the
// drain time is over), then the gRPC streams and in-process sessions,
// each of which records its usage; then the balance leases, the usage
// records and last-used times are flushed, and everything else closed.
func (a *App) Shutdown() {
	a.log.Info("shutting down: draining in-flight requests", "timeout", a.opt.Drain)
	a.ready.draining.Store(true)
	a.grpc.health.Shutdown() // NOT_SERVING: Envoy's health checks move traffic away
	drainCtx, cancel := context.WithTimeout(context.Background(), a.opt.Drain)
	defer cancel()
	drainCtx, cancelMore := a.drainHTTP(drainCtx)
	defer cancelMore()
	a.stopGRPC(drainCtx)
	if a.edge.binding != nil {
		if err := a.edge.binding.Wait(drainCtx); err != nil {
			a.log.Warn("in-process ext_proc sessions still open after the drain", "sessions", a.edge.binding.Open())
		}
	}
	a.log.Info("flushing usage records")
	a.closeAll()
	a.log.Info("stopped")
}

// closeAll gives back the balance leases, flushes the usage records,
// last-used times and refusal counts, then closes what New opened, last first.
func (a *App) closeAll() {
	if a.leaser != nil {
		a.leaser.Close() // no request is in flight: the leases' free money goes back
	}
	if a.budgets != nil {
		a.budgets.Close() // so do the budget leases'
	}
	flushCtx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if a.recorder != nil {
		if err := a.recorder.Close(flushCtx); err != nil {
			a.log.Error("usage records not all written", "err", err)
		}
	}
	if a.lastUsed != nil {
		a.lastUsed.Close(flushCtx)
	}
	if a.refusals != nil {
		a.refusals.Close(flushCtx)
	}
	for i := len(a.undo) - 1; i >= 0; i-- {
		a.undo[i]()
	}
	a.undo = nil
}

// onClose adds f to what closeAll runs, before everything added earlier.
func (a *App) onClose(f func()) { a.undo = append(a.undo, f) }

// goBackground runs f until the server shuts down.
func (a *App) goBackground(f func(ctx context.Context)) {
	a.wg.Go(func() { f(a.background) })
}

// announce says where the server listens: in the log, and as one line on
// Stdout (the line scripts and tests wait for).
func (a *App) announce() {
	cfg := a.cfg.Load()
	grpcAddr, forEnvoy := "", ""
	if a.grpc.lis != nil {
		grpcAddr = a.grpc.lis.Addr().String()
		forEnvoy = " (gRPC for Envoy at " + grpcAddr + ")"
	}
	adminAddr := ""
	if a.adminLis != nil {
		adminAddr = a.adminLis.Addr().String()
	}
	addr := a.httpLis.Addr()
	a.log.Info("tollgate serving", "edge", "http://"+addr.String()+"/v1", "binding", a.opt.Edge, "grpc", grpcAddr,
		"admin", adminAddr, "demo", a.demoAddr(), "models", len(cfg.Models), "providers", len(cfg.Providers))
	if a.opt.Edge == EdgeOff {
		fmt.Fprintf(a.opt.Stdout, "tollgate: dashboard at http://%s/keys, the API through Envoy only%s\n", addr, forEnvoy)
		return
	}
	fmt.Fprintf(a.opt.Stdout, "tollgate: OpenAI-compatible API at http://%s/v1, dashboard at http://%s/keys%s\n", addr, addr, forEnvoy)
}
