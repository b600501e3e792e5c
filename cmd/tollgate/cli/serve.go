package cli

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/authz"
	"github.com/tollgate/tollgate/balance"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/dashboard"
	"github.com/tollgate/tollgate/envoy/edge"
	"github.com/tollgate/tollgate/envoy/inproc"
	"github.com/tollgate/tollgate/envoy/xds"
	"github.com/tollgate/tollgate/extproc"
	"github.com/tollgate/tollgate/health"
	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/metrics"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/tracing"
)

// serveOptions are the flags of `tollgate serve`.
type serveOptions struct {
	configPath string
	db         string
	redisURL   string
	redisWait  time.Duration
	listen     string
	edge       string
	grpc       grpcListenOptions
	xffHops    int
	envoyAddr  string
	cacheTTL   time.Duration
	drain      time.Duration
	journal    string
	admin      string
	http       httpLimits
	log        logOptions
}

func parseServe(args []string, stderr io.Writer) (serveOptions, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o serveOptions
	fs.StringVar(&o.configPath, "config", os.Getenv("TOLLGATE_CONFIG"), "configuration file (YAML); default $TOLLGATE_CONFIG")
	fs.StringVar(&o.db, "db", defaultDB(), "database URL: sqlite:///abs/path.db, sqlite://rel/path.db or postgres://…; default $TOLLGATE_DB or sqlite://tollgate.db")
	fs.StringVar(&o.redisURL, "redis", os.Getenv("TOLLGATE_REDIS"), "Redis URL for rate limits shared by replicas: redis://host:6379/0, a Sentinel set (redis+sentinel://host:26379/0?master_name=NAME&addr=host2:26379) or a Cluster (redis+cluster://host:6379?addr=host2:6379); empty: in-memory limiter")
	fs.DurationVar(&o.redisWait, "redis-timeout", ratelimit.DefaultPrimaryTimeout, "how long a rate-limit check waits for Redis before answering from the in-memory limiter (and treating Redis as down until a probe succeeds)")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:8080", "address of the HTTP listener: the built-in edge (the OpenAI-compatible API under /v1/) and the dashboard (every other path)")
	fs.StringVar(&o.edge, "edge", edgeInProcess, "the built-in edge under /v1/ on --listen: in-process (it calls the ext_authz and ext_proc code directly), grpc (it calls them over a private gRPC connection, as Envoy would), or off (behind Envoy: the listener serves the dashboard only, and --grpc-listen is required)")
	o.grpc.flags(fs)
	fs.IntVar(&o.xffHops, "xff-trusted-hops", 0, "proxies in front of the edge trusted to append to X-Forwarded-For: the built-in edge's, and Envoy's xff_num_trusted_hops in the listener served over xDS; the client address of IP restrictions and of the dashboard's sign-in limit is the entry that many from the right (with --edge off, Envoy is one more hop in front of the dashboard)")
	fs.StringVar(&o.envoyAddr, "envoy-listen", "0.0.0.0:8080", "where the Envoys served over xDS (--grpc-listen) bind the public listener: IP:port")
	fs.DurationVar(&o.cacheTTL, "cache-ttl", 0, "how long a replica may serve a key or account from memory without hearing of a change (default 1s with SQLite; 30s with PostgreSQL, whose changes are announced at once)")
	fs.DurationVar(&o.drain, "drain-timeout", 30*time.Second, "how long shutdown waits for in-flight streams")
	fs.StringVar(&o.journal, "journal", "", "file that keeps usage records the database could not take (replayed at the next start; records it refused for good go to FILE.dead); default beside the SQLite database, or tollgate-usage.journal in the working directory")
	fs.StringVar(&o.admin, "admin-listen", "127.0.0.1:9464", "address of the admin listener: /metrics (Prometheus), /healthz, /readyz; empty: none")
	o.http.flags(fs)
	o.log.flags(fs)
	if err := parseInterleaved(fs, args); err != nil {
		return o, err
	}
	if o.configPath == "" {
		return o, usageError{"serve: --config FILE is required"}
	}
	if o.xffHops < 0 {
		return o, usageError{"serve: --xff-trusted-hops must not be negative"}
	}
	switch o.edge {
	case edgeInProcess, edgeGRPC:
	case edgeOff:
		if o.grpc.addr == "" {
			return o, usageError{"serve: --edge off needs --grpc-listen: without the built-in edge, only Envoy (through gRPC) can serve the API"}
		}
	default:
		return o, usageError{fmt.Sprintf("serve: --edge %q: want in-process, grpc or off", o.edge)}
	}
	return o, nil
}

// dashboardHops is how many proxies in front of the dashboard append to
// X-Forwarded-For: those in front of the edge, and behind Envoy (--edge
// off) Envoy itself, which appends the address of its peer.
func dashboardHops(o serveOptions) int {
	if o.edge == edgeOff {
		return o.xffHops + 1
	}
	return o.xffHops
}

// The built-in edge's bindings (--edge).
const (
	edgeInProcess = "in-process"
	edgeGRPC      = "grpc"
	edgeOff       = "off"
)

// runServe runs Tollgate until ctx ends, then shuts down in order: stop
// accepting, drain in-flight streams, flush usage and last-used times,
// close the database.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseServe(args, stderr)
	if err != nil {
		return err
	}
	// Two loggers share the stream: one write at a time.
	stderr = &lockedWriter{w: stderr}
	log, err := o.log.logger(stderr)
	if err != nil {
		return err
	}
	// The access log's lines go out in batches (see lineBuffer); the last
	// ones when everything else has stopped.
	accessOut := newLineBuffer(stderr, accessFlushInterval)
	defer accessOut.Close()
	accessLog, err := o.log.logger(accessOut)
	if err != nil {
		return err
	}
	cfg, err := config.Load(o.configPath)
	if err != nil {
		return err
	}
	var current atomic.Pointer[config.Config]
	current.Store(cfg)
	cfgNow := current.Load

	st, err := store.Open(ctx, o.db)
	if err != nil {
		return err
	}
	defer st.Close()

	// Every replica hears of key and account changes at once through the
	// database's change feed (PostgreSQL LISTEN/NOTIFY), so its cache may
	// live long; where there is no feed (SQLite, changed by the CLI from
	// another process) a short TTL is the backstop.
	feedCtx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	feed := make(chan error, 1)
	var cache *store.Cache
	ttl := o.cacheTTL
	if ttl == 0 {
		ttl = 30 * time.Second
	}
	cache = store.NewCache(st, ttl, time.Now)
	go func() {
		feed <- st.Subscribe(feedCtx, func(c store.Change) { applyChange(cache, c) })
	}()
	select {
	case err := <-feed:
		if !errors.Is(err, store.ErrNotifyUnsupported) {
			return fmt.Errorf("store change feed: %w", err)
		}
		if o.cacheTTL == 0 {
			cache = store.NewCache(st, time.Second, time.Now)
		}
		log.Info("no change feed in this database; caches expire after", "ttl", cacheTTL(o.cacheTTL, time.Second))
	case <-time.After(200 * time.Millisecond):
		// Subscribed (it blocks while listening).
	}

	var limiter ratelimit.Limiter = ratelimit.NewMemory()
	var fallback *ratelimit.Fallback
	if o.redisURL != "" {
		rc, err := ratelimit.NewRedisClient(o.redisURL, o.redisWait)
		if err != nil {
			return fmt.Errorf("--redis: %w", err)
		}
		ratelimit.QuietRedisLogs()
		defer rc.Close()
		// Permits are claimed from Redis in batches and most checks are
		// answered from the ones in hand; the unused go back when idle and
		// at the end (before the client closes: defers run in reverse).
		leased := ratelimit.NewLeased(ratelimit.NewRedis(rc, ratelimit.RedisOptions{}), ratelimit.LeaseOptions{Logger: log})
		defer leased.Close()
		fallback = ratelimit.NewFallback(leased, ratelimit.NewMemory(), log,
			ratelimit.WithPrimaryTimeout(o.redisWait))
		limiter = fallback
	}
	m := metrics.New()
	tracer, stopTracing, err := tracing.Setup(ctx, os.LookupEnv)
	if err != nil {
		return err
	}
	defer func() {
		flush, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := stopTracing(flush); err != nil {
			log.Warn("flushing traces failed", "err", err)
		}
	}()

	journal := journalPath(o)
	if n, err := extproc.ReplayJournal(ctx, st, journal); err != nil {
		return err
	} else if n > 0 {
		log.Info("usage journal replayed", "records", n, "journal", journal)
	}
	recorder := extproc.NewRecorder(st, extproc.RecorderOptions{
		Journal:   journal,
		Logger:    log,
		OnWritten: func(ids []string) { invalidateAccounts(cache, ids) },
	})
	lastUsed := authz.NewLastUsed(st, time.Second, log)
	// Balance holds are served from this replica's leases, in memory.
	leaser := balance.New(balance.Options{Store: st, Logger: log})
	// xdsUpdate hands a reloaded configuration to Envoy (when there is a
	// gRPC server for it).
	xdsUpdate := func(context.Context, *config.Config) error { return nil }
	go sweepEveryMinute(feedCtx, log, "expired balance holds", st.ReleaseExpired)
	go sweepEveryMinute(feedCtx, log, "expired dashboard sessions", st.DeleteExpiredSessions)
	go sweepEveryMinute(feedCtx, log, "expired stored responses", st.DeleteExpiredResponses)

	// Messages carry whole bodies (the router and upstream steps buffer the
	// request; a non-streamed answer comes whole): allow well above the
	// body limit.
	msgLimit := max(cfg.MaxBodyBytes, 16<<20)*2 + 1<<20
	// The key the router step signs what it hands the upstream step with,
	// and ext_authz its decisions: one for every replica (Envoy may send a
	// request's Check and its steps to different ones), decided by the
	// first to start.
	candidate := make([]byte, 32)
	if _, err := rand.Read(candidate); err != nil {
		return fmt.Errorf("step key: %w", err)
	}
	stepKey, err := st.SharedSecret(ctx, "ext_proc step key", candidate)
	if err != nil {
		return err
	}
	// The gRPC server for Envoy, when asked for (--grpc-listen).
	// WaitForHandlers: a forced stop still lets each handler return, so the
	// ext_proc steps cut off by it write their usage records.
	// A panic in a call fails that call, never the process (guard); the
	// ext_proc steps recover their own first, answering and recording
	// the request.
	serverOpts := []grpc.ServerOption{grpc.MaxRecvMsgSize(msgLimit), grpc.MaxSendMsgSize(msgLimit), grpc.WaitForHandlers(true),
		grpc.ChainUnaryInterceptor(guard.UnaryServerInterceptor("grpc_unary", log)),
		grpc.ChainStreamInterceptor(guard.StreamServerInterceptor("grpc_stream", log))}
	var (
		grpcServer *grpc.Server
		grpcLis    net.Listener
		grpcHealth = grpchealth.NewServer()
	)
	if o.grpc.addr != "" {
		if err := o.grpc.load(); err != nil {
			return err
		}
		var grpcCreds []grpc.ServerOption
		grpcLis, grpcCreds, err = o.grpc.listen(log)
		if err != nil {
			return err
		}
		defer grpcLis.Close()
		grpcServer = grpc.NewServer(append(serverOpts, grpcCreds...)...)
		xdsServer := xds.New(ctx, xds.Options{Logger: log, Listener: xds.ListenerOptions{
			Address: o.envoyAddr, XFFTrustedHops: uint32(o.xffHops),
		}})
		xdsServer.Register(grpcServer)
		if err := xdsServer.Update(ctx, cfg); err != nil {
			return fmt.Errorf("xds: %w", err)
		}
		xdsUpdate = xdsServer.Update
	}
	authzServer := metrics.Authz{Next: authz.New(authz.Options{
		Keys: cache, Limiter: limiter, Config: cfgNow, Toucher: lastUsed, Logger: log, Spare: leaser.Spare,
		DecisionKey: stepKey,
	}), Metrics: m}
	deployments := health.New(health.Options{})
	extprocServer := extproc.New(extproc.Options{
		Config: cfgNow, Keys: cache, Balance: leaser, Logger: log,
		// Every usage record: counted in the metrics, logged as the
		// request's access-log line, then written.
		Usage:  metrics.Usage{Next: extproc.AccessLog{Usage: recorder, Logger: accessLog}, Metrics: m},
		Health: deployments, StepKey: stepKey, Observer: metrics.ExtProc{Metrics: m},
		Responses: st,
	})
	grpcHealth.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if grpcServer != nil {
		healthpb.RegisterHealthServer(grpcServer, grpcHealth)
		authv3.RegisterAuthorizationServer(grpcServer, authzServer)
		extprocv3.RegisterExternalProcessorServer(grpcServer, extprocServer)
	}
	registerGauges(m, cfgNow, deployments, recorder, journal, fallback)
	m.Gauge("tollgate_database_up", "1 when the database answers a query within a second, 0 otherwise (checked at scrape time).", func() float64 {
		pctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if st.Ping(pctx) != nil {
			return 0
		}
		return 1
	})
	ready := &readiness{ping: st.Ping}
	if fallback != nil {
		ready.redis = func() string {
			if fallback.Stats().Down {
				return "down (rate limits per replica, from memory)"
			}
			return "up"
		}
	}

	dash, err := dashboard.New(dashboard.Options{
		Store: st, Config: cfgNow, Limiter: limiter, KeyChanged: cache.InvalidateKey, Logger: log,
		Available: deployments.Available, XFFTrustedHops: dashboardHops(o),
	})
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	mgmt, err := manage.New(manage.Options{Store: st, Config: cfgNow, KeyChanged: cache.InvalidateKey, Logger: log, Available: deployments.Available,
		Limiter: limiter})
	if err != nil {
		return fmt.Errorf("management API: %w", err)
	}
	httpLis, err := net.Listen("tcp", o.listen)
	if err != nil {
		grpcLis.Close()
		return fmt.Errorf("--listen: %w", err)
	}
	grpcErr := make(chan error, 2)
	if grpcServer != nil {
		go func() { grpcErr <- grpcServer.Serve(grpcLis) }()
	}
	// The built-in edge, bound to the same servers in process (the
	// default) or over a private gRPC connection no other process can
	// open; none behind Envoy.
	var (
		privateServer *grpc.Server
		binding       *inproc.Binding
		e             http.Handler
	)
	var clusters atomic.Pointer[map[string]edge.Cluster]
	table := edge.Clusters(cfg)
	clusters.Store(&table)
	// Closed when the drain time is over: the edge then ends the streams
	// still running with an error event (their usage still recorded).
	stopEdge := make(chan struct{})
	var stopOnce sync.Once
	closeEdge := func() { stopOnce.Do(func() { close(stopEdge) }) }
	defer closeEdge()
	if o.edge != edgeOff {
		edgeOpt := edge.Options{
			Health:         deployments, // one passive health for failover, admission, /v1/models and the dashboard
			Stop:           stopEdge,
			Tracer:         tracer,
			Clusters:       func() map[string]edge.Cluster { return *clusters.Load() },
			MaxBodyBytes:   func() int { return current.Load().MaxBodyBytes },
			XFFTrustedHops: o.xffHops,
			Logger:         log,
		}
		if o.edge == edgeGRPC {
			privateServer = grpc.NewServer(serverOpts...)
			authv3.RegisterAuthorizationServer(privateServer, authzServer)
			extprocv3.RegisterExternalProcessorServer(privateServer, extprocServer)
			private := newInProcess()
			go func() { grpcErr <- privateServer.Serve(private.lis) }()
			conn, err := private.dial(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(msgLimit), grpc.MaxCallSendMsgSize(msgLimit)))
			if err != nil {
				return fmt.Errorf("connect edge to gRPC: %w", err)
			}
			defer conn.Close()
			edgeOpt.Authz, edgeOpt.ExtProc = authv3.NewAuthorizationClient(conn), extprocv3.NewExternalProcessorClient(conn)
		} else {
			binding = inproc.Bind(authzServer, extprocServer)
			edgeOpt.Authz, edgeOpt.ExtProc = binding.Authz(), binding.ExtProc()
		}
		e = edge.New(edgeOpt)
	} else {
		e = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body := oaierror.NotFound.With("The built-in edge is off (--edge off): this replica serves the API through Envoy only.", "").Body()
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write(body)
		})
	}
	// One HTTP listener, routed as Envoy's bootstrap routes it: the API to
	// the edge, the management API (/api/v1/, which checks its own tokens)
	// and every other path to the dashboard's listener.
	inflight := &inflightRequests{}
	mux := routes(inflight.track(e), mgmt.Handler(), dash, log)

	// Reload the configuration when its file changes: the servers read it
	// per request, the edge's routing table and Envoy's clusters (xDS)
	// follow. A bad new file is logged and the running one kept.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		err := config.Watch(watchCtx, o.configPath, os.LookupEnv, func(next *config.Config) {
			if err := xdsUpdate(watchCtx, next); err != nil {
				log.Error("configuration change not applied", "err", err)
				return
			}
			current.Store(next)
			table := edge.Clusters(next)
			clusters.Store(&table)
			log.Info("configuration applied", "models", len(next.Models), "providers", len(next.Providers))
		}, func(err error) {
			log.Error("configuration change rejected; keeping the running one", "err", err)
		})
		if err != nil {
			log.Error("not watching the configuration file", "err", err)
		}
	}()

	httpServer := o.http.server(mux)
	httpErr := make(chan error, 1)
	go func() { httpErr <- httpServer.Serve(o.http.listener(httpLis)) }()
	m.Gauge("tollgate_active_requests", "API requests being answered by the built-in edge (streams included).",
		func() float64 { return float64(inflight.n.Load()) })

	adminAddr := ""
	if o.admin != "" {
		adminLis, err := net.Listen("tcp", o.admin)
		if err != nil {
			return fmt.Errorf("--admin-listen: %w", err)
		}
		adminAddr = adminLis.Addr().String()
		adminServer := &http.Server{Handler: guard.Handler("admin", log, adminHandler(m, ready)), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
		go func() { _ = adminServer.Serve(adminLis) }()
		defer adminServer.Close()
	}

	grpcAddr, forEnvoy := "", ""
	if grpcLis != nil {
		grpcAddr = grpcLis.Addr().String()
		forEnvoy = " (gRPC for Envoy at " + grpcAddr + ")"
	}
	log.Info("tollgate serving", "edge", "http://"+httpLis.Addr().String()+"/v1", "binding", o.edge, "grpc", grpcAddr,
		"admin", adminAddr, "models", len(cfg.Models), "providers", len(cfg.Providers))
	if o.edge == edgeOff {
		fmt.Fprintf(stdout, "tollgate: dashboard at http://%s/keys, the API through Envoy only%s\n", httpLis.Addr(), forEnvoy)
	} else {
		fmt.Fprintf(stdout, "tollgate: OpenAI-compatible API at http://%s/v1, dashboard at http://%s/keys%s\n", httpLis.Addr(), httpLis.Addr(), forEnvoy)
	}

	var runErr error
	select {
	case <-ctx.Done():
	case err := <-httpErr:
		runErr = fmt.Errorf("edge: %w", err)
	case err := <-grpcErr:
		runErr = fmt.Errorf("grpc: %w", err)
	}

	log.Info("shutting down: draining in-flight requests", "timeout", o.drain)
	ready.draining.Store(true)
	grpcHealth.Shutdown() // NOT_SERVING: Envoy's health checks move traffic away (when there is a gRPC server)
	drainCtx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	if err := httpServer.Shutdown(drainCtx); err != nil {
		log.Warn("edge did not drain in time; ending the streams still running", "err", err)
		closeEdge()
		// The handlers end their streams at once (an error event each);
		// give them a moment to tell ext_proc, which records them.
		if !inflight.wait(5 * time.Second) {
			log.Warn("edge handlers still running after stop", "requests", inflight.n.Load())
		}
		drainCtx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
	}
	// Then the servers' own streams end: gRPC's (Envoy's, and the edge's
	// over --edge grpc) and the in-process sessions, each of which writes
	// its usage record as it ends.
	var servers []*grpc.Server
	for _, g := range []*grpc.Server{grpcServer, privateServer} {
		if g != nil {
			servers = append(servers, g)
		}
	}
	stopped := make(chan struct{})
	go func() {
		// Ends when the servers have stopped, which the Stop calls below
		// force when the drain time runs out.
		var wg sync.WaitGroup
		for _, g := range servers {
			wg.Go(g.GracefulStop)
		}
		wg.Wait()
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-drainCtx.Done():
		log.Warn("gRPC streams did not drain in time; stopping them")
		for _, g := range servers {
			g.Stop()
		}
		<-stopped
	}
	if binding != nil {
		if err := binding.Wait(drainCtx); err != nil {
			log.Warn("in-process ext_proc sessions still open after the drain", "sessions", binding.Open())
		}
	}
	// No request is in flight: the leases' free money goes back.
	leaser.Close()
	log.Info("flushing usage records")
	flushCtx, cancelFlush := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancelFlush()
	if err := recorder.Close(flushCtx); err != nil {
		log.Error("usage records not all written", "err", err)
	}
	lastUsed.Close(flushCtx)
	log.Info("stopped")
	if runErr != nil && !errors.Is(runErr, http.ErrServerClosed) {
		return runErr
	}
	return nil
}

// registerGauges reads, at scrape time, the health of every deployment, the
// usage recorder's queue and journal, and Redis.
func registerGauges(m *metrics.Metrics, cfg func() *config.Config, h *health.Tracker, rec *extproc.Recorder, journal string, fallback *ratelimit.Fallback) {
	m.Deployments(func() []metrics.Deployment {
		c := cfg()
		var out []metrics.Deployment
		for i := range c.Models {
			for _, d := range c.Models[i].Deployments {
				if p, ok := c.Provider(d.Provider); !ok || !p.IsEnabled() {
					continue
				}
				out = append(out, metrics.Deployment{ID: d.ID, Model: c.Models[i].ID, Provider: d.Provider, Up: h.Available(d.ID)})
			}
		}
		return out
	})
	m.Gauge("tollgate_usage_queue_length", "Usage records waiting in memory to be written.", func() float64 { return float64(rec.Len()) })
	m.Gauge("tollgate_usage_journal_bytes", "Size of the usage journal (records the database could not take, replayed at the next start).", func() float64 {
		st, err := os.Stat(journal)
		if err != nil {
			return 0
		}
		return float64(st.Size())
	})
	if fallback != nil {
		m.Gauge("tollgate_redis_up", "1 when the rate limiter reaches Redis, 0 when it answers from memory.", func() float64 {
			if fallback.Stats().Down {
				return 0
			}
			return 1
		})
	}
}

// journalPath is --journal, or its default: beside a SQLite database, else
// in the working directory.
func journalPath(o serveOptions) string {
	if o.journal != "" {
		return o.journal
	}
	if rest, ok := strings.CutPrefix(o.db, "sqlite://"); ok {
		path, _, _ := strings.Cut(rest, "?")
		if path != "" {
			return path + ".usage-journal"
		}
	}
	return "tollgate-usage.journal"
}

func cacheTTL(flag, dflt time.Duration) time.Duration {
	if flag > 0 {
		return flag
	}
	return dflt
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

// sweepEveryMinute runs sweep once a minute until ctx ends, logging what it
// removed: balance holds no usage record settled (their replica died
// mid-request), dashboard sessions past their expiry.
func sweepEveryMinute[N int | int64](ctx context.Context, log *slog.Logger, what string, sweep func(context.Context, time.Time) (N, error)) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			n, err := sweep(ctx, now)
			if err != nil {
				log.Warn("removing "+what+" failed", "err", err)
			} else if n > 0 {
				log.Info("removed "+what, "count", n)
			}
		}
	}
}

func invalidateAccounts(c *store.Cache, ids []string) {
	for _, id := range ids {
		c.InvalidateAccount(id)
	}
}

// inflightRequests counts the API requests being handled, so that shutdown
// can wait for the handlers it has told to stop.
type inflightRequests struct {
	n    atomic.Int64
	done chan struct{} // closed and replaced when n drops to zero; guarded by mu
	mu   sync.Mutex
}

func (f *inflightRequests) track(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.n.Add(1)
		defer func() {
			if f.n.Add(-1) == 0 {
				f.mu.Lock()
				if f.done != nil {
					close(f.done)
					f.done = nil
				}
				f.mu.Unlock()
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// wait reports whether every handler returned within d.
func (f *inflightRequests) wait(d time.Duration) bool {
	f.mu.Lock()
	if f.n.Load() == 0 {
		f.mu.Unlock()
		return true
	}
	if f.done == nil {
		f.done = make(chan struct{})
	}
	done := f.done
	f.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// routes is the HTTP listener's mux, as Envoy's bootstrap routes it: the
// API to the edge (which recovers its own panics, mid-stream too), the
// management API (/api/v1/, which checks its own tokens) and every other
// path to the dashboard, each under guard: a panic answers its request 500
// internal_error and never ends the process.
func routes(api, management, dashboard http.Handler, log *slog.Logger) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/v1/", api)
	mux.Handle("/api/v1/", guard.Handler("manage", log, management))
	mux.Handle("/", guard.Handler("dashboard", log, dashboard))
	return mux
}
