package app

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/dashboard"
	"github.com/tollgate/tollgate/envoy/edge"
	"github.com/tollgate/tollgate/envoy/inproc"
	"github.com/tollgate/tollgate/extproc"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/manage/restapi"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// edgeParts are the built-in edge under /v1/ and what stops it.
type edgeParts struct {
	handler  http.Handler
	binding  *inproc.Binding // with --edge in-process
	inflight *inflightRequests
	// stop is closed when the drain time is over: the edge then ends the
	// streams still running with an error event (their usage still
	// recorded).
	stop     chan struct{}
	stopOnce sync.Once
}

func (e *edgeParts) close() { e.stopOnce.Do(func() { close(e.stop) }) }

// buildEdge makes the built-in edge, bound to the same servers in process
// (the default) or over a private gRPC connection no other process can
// open; behind Envoy (--edge off), a handler that says the API is not
// served here.
func (a *App) buildEdge(context.Context) error {
	a.edge.inflight = &inflightRequests{}
	a.edge.stop = make(chan struct{})
	a.onClose(a.edge.close)
	if a.opt.Edge == EdgeOff {
		a.edge.handler = http.HandlerFunc(edgeIsOff)
		return nil
	}
	opt := edge.Options{
		Health:         a.deployments, // one passive health for failover, admission, /v1/models and the dashboard
		Stop:           a.edge.stop,
		Tracer:         a.tracer,
		Clusters:       func() map[string]edge.Cluster { return *a.clusters.Load() },
		MaxBodyBytes:   func() int { return a.cfg.Load().MaxBodyBytes },
		XFFTrustedHops: a.opt.XFFTrustedHops,
		Logger:         a.log,
		InProcess:      a.demoTransports(),
	}
	if a.opt.Edge == EdgeGRPC {
		if err := a.bindEdgeOverGRPC(&opt); err != nil {
			return err
		}
	} else {
		a.edge.binding = bindInProcess(a.authz, a.extproc)
		opt.Authz, opt.ExtProc = a.edge.binding.Authz(), a.edge.binding.ExtProc()
	}
	a.edge.handler = edge.New(opt)
	return nil
}

// bindInProcess binds the edge's clients to the ext_authz server and the
// ext_proc server's sessions in process. The binding lives here, in the
// wiring, so that envoy/inproc (below the servers) imports neither.
func bindInProcess(authz authv3.AuthorizationServer, proc *extproc.Server) *inproc.Binding {
	return inproc.New(authz, func(ctx context.Context, step string) (inproc.Session, error) {
		s, err := proc.Open(ctx, step)
		if err != nil {
			return nil, err // not a typed nil Session
		}
		return s, nil
	})
}

// bindEdgeOverGRPC serves ext_authz and ext_proc on a private gRPC server
// and points the edge's clients at it.
func (a *App) bindEdgeOverGRPC(opt *edge.Options) error {
	a.grpc.private = grpc.NewServer(a.serverOptions()...)
	authv3.RegisterAuthorizationServer(a.grpc.private, a.authz)
	extprocv3.RegisterExternalProcessorServer(a.grpc.private, a.extproc)
	a.grpc.privateLis = newInProcess()
	limit := msgLimit(a.cfg.Load())
	conn, err := a.grpc.privateLis.dial(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)))
	if err != nil {
		return fmt.Errorf("connect edge to gRPC: %w", err)
	}
	a.onClose(func() { _ = conn.Close() })
	opt.Authz, opt.ExtProc = authv3.NewAuthorizationClient(conn), extprocv3.NewExternalProcessorClient(conn)
	return nil
}

func edgeIsOff(w http.ResponseWriter, _ *http.Request) {
	body := oaierror.NotFound.With("The built-in edge is off (--edge off): this replica serves the API through Envoy only.", "").Body()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write(body)
}

// dashboardHops is how many proxies in front of the dashboard append to
// X-Forwarded-For: those in front of the edge, and behind Envoy (--edge
// off) Envoy itself, which appends the address of its peer.
func dashboardHops(o Options) int {
	if o.Edge == EdgeOff {
		return o.XFFTrustedHops + 1
	}
	return o.XFFTrustedHops
}

// buildManagement builds the management service, once for the process:
// the dashboard and the REST API are two doors to the same one, and every
// change made through either reaches this replica's caches at once (other
// replicas hear it from the change feed). Invitations are mailed through
// the smtp section in force at start.
func (a *App) buildManagement() (*manage.Service, error) {
	return manage.New(manage.Options{Store: a.st, Config: a.cfg.Load, KeyChanged: a.keyChanged, AccountChanged: a.accountChanged,
		Logger: a.log, Available: a.deployments.Available, WebhookKey: a.alertsKey, Mailer: manage.MailerFor(a.cfg.Load())})
}

// buildHTTP opens the HTTP listener, routed as Envoy's bootstrap routes
// it: the API to the edge, the management API (/api/v1/, which checks its
// own tokens) and every other path to the dashboard.
func (a *App) buildHTTP(context.Context) error {
	svc, err := a.buildManagement()
	if err != nil {
		return fmt.Errorf("management service: %w", err)
	}
	dash, err := dashboard.New(dashboard.Options{
		Manage: svc, Store: a.st, Config: a.cfg.Load, Limiter: a.limiter, Logger: a.log,
		Available: a.deployments.Available, XFFTrustedHops: dashboardHops(a.opt),
		// Every replica shares the alerts' key, so a single sign-on
		// started on one finishes on any.
		SSOKey: a.alertsKey,
	})
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	mgmt, err := restapi.New(svc, restapi.Options{Store: a.st, Config: a.cfg.Load, Limiter: a.limiter, Logger: a.log})
	if err != nil {
		return fmt.Errorf("management API: %w", err)
	}
	lis, err := net.Listen("tcp", a.opt.Listen)
	if err != nil {
		return fmt.Errorf("--listen: %w", err)
	}
	a.httpLis = lis
	a.onClose(func() { _ = lis.Close() })
	a.httpServer = a.opt.HTTP.server(routes(a.edge.inflight.track(a.edge.handler), mgmt.Handler(), dash, a.log))
	a.metrics.Gauge("tollgate_active_requests", "API requests being answered by the built-in edge (streams included).",
		func() float64 { return float64(a.edge.inflight.n.Load()) })
	return nil
}

// drainHTTP stops the HTTP listener and waits for its requests until ctx
// ends; then it ends the edge's streams (an error event each) and gives
// their handlers a moment to tell ext_proc, which records them. It
// returns the context the rest of the drain runs under, and its cancel.
func (a *App) drainHTTP(ctx context.Context) (context.Context, context.CancelFunc) {
	err := a.httpServer.Shutdown(ctx)
	if err == nil {
		return ctx, func() {}
	}
	a.log.Warn("edge did not drain in time; ending the streams still running", "err", err)
	a.edge.close()
	if !a.edge.inflight.wait(5 * time.Second) {
		a.log.Warn("edge handlers still running after stop", "requests", a.edge.inflight.n.Load())
	}
	return context.WithTimeout(context.Background(), 5*time.Second)
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

// keyChanged drops a key this replica changed from its caches at once
// (other replicas hear it from the change feed).
func (a *App) keyChanged(id string) {
	a.cache.InvalidateKey(id)
	a.budgets.Changed(store.Change{Kind: store.ChangeKey, ID: id})
}

// accountChanged drops what this replica cached of an account it changed:
// its keys' budgets, and the account and its keys (a change of one of its
// teams changes what its keys may use).
func (a *App) accountChanged(id string) {
	a.cache.InvalidateAccount(id)
	a.budgets.Changed(store.Change{Kind: store.ChangeAccount, ID: id})
}
