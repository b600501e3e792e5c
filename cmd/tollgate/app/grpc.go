package app

import (
	"context"
	"fmt"
	"net"
	"sync"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/xds"
	"github.com/tollgate/tollgate/extproc"
	"github.com/tollgate/tollgate/internal/guard"
)

// grpcParts are the gRPC servers: the one for Envoy (--grpc-listen), and
// the private one the edge calls with --edge grpc.
type grpcParts struct {
	server  *grpc.Server // nil without --grpc-listen
	lis     net.Listener
	health  *grpchealth.Server
	private *grpc.Server // nil unless --edge grpc
	// privateLis is the private server's in-process listener.
	privateLis *inProcess
	// xdsUpdate hands a reloaded configuration to Envoy (a no-op without
	// a gRPC server).
	xdsUpdate func(context.Context, *config.Config) error
	// healthChanged tells the xDS server that a deployment's circuit
	// changed (a no-op without a gRPC server).
	healthChanged func()
}

// msgLimit bounds a gRPC message. Messages carry whole bodies (the router
// and upstream steps buffer the request; a non-streamed answer comes
// whole): allow well above the body limit.
func msgLimit(cfg *config.Config) int {
	return max(cfg.MaxBodyBytes, 16<<20)*2 + 1<<20
}

// serverOptions are every gRPC server's. WaitForHandlers: a forced stop
// still lets each handler return, so the ext_proc steps cut off by it
// write their usage records. Calls run on extproc.StreamWorkers reused
// goroutines, whose stacks stay grown, before new ones; messages decode
// with extproc.Codec (an upstream step's forwarded metadata is read on
// its request headers alone). A panic in a call fails that call, never
// the process (guard); the ext_proc steps recover their own first,
// answering and recording the request.
func (a *App) serverOptions() []grpc.ServerOption {
	limit := msgLimit(a.cfg.Load())
	return []grpc.ServerOption{grpc.MaxRecvMsgSize(limit), grpc.MaxSendMsgSize(limit), grpc.WaitForHandlers(true),
		grpc.NumStreamWorkers(extproc.StreamWorkers), grpc.ForceServerCodecV2(extproc.Codec()),
		grpc.ChainUnaryInterceptor(guard.UnaryServerInterceptor("grpc_unary", a.log)),
		grpc.ChainStreamInterceptor(guard.StreamServerInterceptor("grpc_stream", a.log))}
}

// buildGRPC opens the gRPC listener for Envoy, when asked for, with its
// TLS and the xDS control plane that serves Envoy its configuration.
func (a *App) buildGRPC(ctx context.Context) error {
	a.grpc.health = grpchealth.NewServer()
	a.grpc.xdsUpdate = func(context.Context, *config.Config) error { return nil }
	if a.opt.GRPC.Addr == "" {
		return nil
	}
	if err := a.opt.GRPC.load(); err != nil {
		return err
	}
	lis, creds, err := a.opt.GRPC.listen(a.log)
	if err != nil {
		return err
	}
	a.grpc.lis = lis
	a.onClose(func() { _ = lis.Close() })
	a.grpc.server = grpc.NewServer(append(a.serverOptions(), creds...)...)
	// Envoy's clusters carry this replica's view of the deployments'
	// circuits: a deployment whose circuit is open is UNHEALTHY there.
	xdsServer := xds.New(ctx, xds.Options{Logger: a.log, Health: a.deployments, Listener: xds.ListenerOptions{
		Address: a.opt.EnvoyListen, XFFTrustedHops: uint32(a.opt.XFFTrustedHops),
	}})
	xdsServer.Register(a.grpc.server)
	if err := xdsServer.Update(ctx, a.cfg.Load()); err != nil {
		return fmt.Errorf("xds: %w", err)
	}
	a.grpc.xdsUpdate = xdsServer.Update
	a.grpc.healthChanged = xdsServer.HealthChanged
	a.goBackground(xdsServer.Run)
	return nil
}

// registerGRPC puts health, ext_authz and ext_proc on the server for
// Envoy.
func (a *App) registerGRPC() {
	a.grpc.health.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	if a.grpc.server == nil {
		return
	}
	healthpb.RegisterHealthServer(a.grpc.server, a.grpc.health)
	authv3.RegisterAuthorizationServer(a.grpc.server, a.authz)
	extprocv3.RegisterExternalProcessorServer(a.grpc.server, a.extproc)
}

// serveGRPC starts the gRPC servers there are; each sends on errs when it
// stops.
func (a *App) serveGRPC(errs chan<- error) {
	if a.grpc.server != nil {
		go func() { errs <- grpcStopped(a.grpc.server.Serve(a.grpc.lis)) }()
	}
	if a.grpc.private != nil {
		go func() { errs <- grpcStopped(a.grpc.private.Serve(a.grpc.privateLis.lis)) }()
	}
}

func grpcStopped(err error) error {
	if err == nil {
		return fmt.Errorf("grpc: stopped")
	}
	return fmt.Errorf("grpc: %w", err)
}

// stopGRPC ends the servers' own streams: gRPC's (Envoy's, and the edge's
// over --edge grpc), each of which writes its usage record as it ends;
// gracefully until ctx ends, then by force.
func (a *App) stopGRPC(ctx context.Context) {
	var servers []*grpc.Server
	for _, g := range []*grpc.Server{a.grpc.server, a.grpc.private} {
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
	case <-ctx.Done():
		a.log.Warn("gRPC streams did not drain in time; stopping them")
		for _, g := range servers {
			g.Stop()
		}
		<-stopped
	}
}
