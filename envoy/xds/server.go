package xds

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"

	"github.com/tollgate/tollgate/config"
)

// NodeGroup is the one key the snapshot cache holds. Every Envoy that
// connects, whatever node id and cluster its bootstrap names, hashes to it
// and is served the same snapshot: all production Envoys are
// interchangeable replicas of one edge, so there is nothing per node to
// tell apart, and an Envoy with an unexpected node id still gets clusters
// instead of waiting forever.
const NodeGroup = "tollgate"

// anyNode is the snapshot cache's node hash: every node maps to NodeGroup.
type anyNode struct{}

func (anyNode) ID(*corev3.Node) string { return NodeGroup }

// Options configure a Server. The zero value is usable.
type Options struct {
	// Logger receives configuration pushes and Envoy's rejections (NACKs);
	// nil means slog.Default().
	Logger *slog.Logger
	// Listener places the public listener every snapshot carries.
	Listener ListenerOptions
}

// Server serves the model clusters to Envoys over ADS (state of the world
// and delta), plus the standalone CDS service for on-demand cluster
// discovery (used by the mesh examples).
type Server struct {
	cache cachev3.SnapshotCache
	xds   serverv3.Server
	log   *slog.Logger
	lis   ListenerOptions

	mu      sync.Mutex
	version string
}

// New returns a Server with an empty cache: Envoys that connect before the
// first Update wait for it. ctx bounds the xDS server's background work.
func New(ctx context.Context, opt Options) *Server {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "xds")
	s := &Server{log: log, lis: opt.Listener}
	s.cache = cachev3.NewSnapshotCache(true, anyNode{}, cacheLogger{log})
	s.xds = serverv3.NewServer(ctx, s.cache, serverv3.CallbackFuncs{
		StreamOpenFunc: func(_ context.Context, id int64, typeURL string) error {
			s.log.Debug("xds stream opened", "stream", id, "type", typeURL)
			return nil
		},
		StreamClosedFunc: func(id int64, node *corev3.Node) {
			s.log.Debug("xds stream closed", "stream", id, "node", node.GetId())
		},
		StreamRequestFunc: func(id int64, req *discoverygrpc.DiscoveryRequest) error {
			s.noteNACK(id, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail().GetMessage())
			return nil
		},
		StreamDeltaRequestFunc: func(id int64, req *discoverygrpc.DeltaDiscoveryRequest) error {
			s.noteNACK(id, req.GetNode(), req.GetTypeUrl(), req.GetResponseNonce(), req.GetErrorDetail().GetMessage())
			return nil
		},
	})
	return s
}

func (s *Server) noteNACK(stream int64, node *corev3.Node, typeURL, nonce, detail string) {
	if detail == "" {
		return
	}
	s.log.Error("envoy rejected the configuration it was sent",
		"stream", stream, "node", node.GetId(), "type", typeURL, "nonce", nonce, "error", detail)
}

// Register adds the aggregated discovery service (and the cluster discovery
// service, for on-demand CDS) to Tollgate's gRPC server, beside ext_authz
// and ext_proc.
func (s *Server) Register(g *grpc.Server) {
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, s.xds)
	clusterservice.RegisterClusterDiscoveryServiceServer(g, s.xds)
}

// Update builds and validates the listener, routes and clusters for cfg and, when they differ
// from what Envoys have, sets a new snapshot for every node. A
// configuration that cannot be served returns an error and leaves the
// snapshot in force untouched.
func (s *Server) Update(ctx context.Context, cfg *config.Config) error {
	res, err := Build(cfg, s.lis)
	if err != nil {
		return err
	}
	version, err := Version(res)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if version == s.version {
		return nil
	}
	snap, err := snapshotOf(res, version)
	if err != nil {
		return err
	}
	if err := s.cache.SetSnapshot(ctx, NodeGroup, snap); err != nil {
		return fmt.Errorf("xds: setting snapshot %s: %w", version, err)
	}
	s.log.Info("pushing listener, routes and clusters to envoy", "version", version, "previous", s.version, "clusters", len(res.Clusters))
	s.version = version
	return nil
}

// Version is the version of the snapshot in force ("" before the first
// Update).
func (s *Server) Version() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// cacheLogger adapts slog to go-control-plane's logger. The cache logs
// every watch at debug level; that stays at debug.
type cacheLogger struct{ l *slog.Logger }

func (c cacheLogger) Debugf(format string, args ...any) { c.l.Debug(fmt.Sprintf(format, args...)) }
func (c cacheLogger) Infof(format string, args ...any)  { c.l.Debug(fmt.Sprintf(format, args...)) }
func (c cacheLogger) Warnf(format string, args ...any)  { c.l.Warn(fmt.Sprintf(format, args...)) }
func (c cacheLogger) Errorf(format string, args ...any) { c.l.Error(fmt.Sprintf(format, args...)) }
