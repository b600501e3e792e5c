package xds

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

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
	// Health says which deployments take requests (a health.Tracker):
	// the endpoint of one that does not is served UNHEALTHY, so Envoy
	// sends its model's requests to the other deployments. nil: every
	// deployment is healthy.
	Health Health
	// PushInterval is the least time between two pushes that Run makes
	// for health changes (changes within it are coalesced into one push),
	// and how often Run asks Health again for the changes nobody tells
	// it of (a circuit whose cooldown ended); 0 means DefaultPushInterval.
	PushInterval time.Duration

	// after is Run's timer; nil means time.After. Tests set one they
	// fire.
	after func(time.Duration) <-chan time.Time
}

// DefaultPushInterval is Options.PushInterval's default: a deployment
// whose circuit flaps costs Envoy at most one cluster update a second.
const DefaultPushInterval = time.Second

// Health is the passive health of deployments, by deployment id.
type Health interface {
	Available(deployment string) bool
}

// Server serves the model clusters to Envoys over ADS (state of the world
// and delta), plus the standalone CDS service for on-demand cluster
// discovery (used by the mesh examples).
type Server struct {
	cache  cachev3.SnapshotCache
	xds    serverv3.Server
	log    *slog.Logger
	lis    ListenerOptions
	health Health
	every  time.Duration
	after  func(time.Duration) <-chan time.Time
	// changed holds one wake-up for Run: HealthChanged calls made before
	// Run takes it coalesce into one.
	changed chan struct{}

	mu      sync.Mutex
	version string
	cfg     *config.Config // the configuration in force; nil before the first Update
	down    []string       // deployments served UNHEALTHY in the snapshot in force
}

// New returns a Server with an empty cache: Envoys that connect before the
// first Update wait for it. ctx bounds the xDS server's background work.
func New(ctx context.Context, opt Options) *Server {
	log := opt.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("component", "xds")
	s := &Server{log: log, lis: opt.Listener, health: opt.Health, every: opt.PushInterval, after: opt.after, changed: make(chan struct{}, 1)}
	if s.every <= 0 {
		s.every = DefaultPushInterval
	}
	if s.after == nil {
		s.after = time.After
	}
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

// Update builds and validates the listener, routes and clusters for cfg,
// each deployment's endpoint healthy or not as Health says now, and, when
// they differ from what Envoys have, sets a new snapshot for every node. A
// configuration that cannot be served returns an error and leaves the
// snapshot in force untouched.
func (s *Server) Update(ctx context.Context, cfg *config.Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.publish(ctx, cfg, "pushing listener, routes and clusters to envoy")
}

// HealthChanged tells the server that a deployment's health changed (wire
// it to health.Options.OnChange): Run pushes the change. It never blocks.
func (s *Server) HealthChanged() {
	select {
	case s.changed <- struct{}{}:
	default: // a wake-up is pending already; it will read the change too
	}
}

// Run pushes health changes until ctx ends: at once when HealthChanged
// tells of one, and every PushInterval for the ones nobody tells (a
// circuit's cooldown ending makes it half-open: its endpoint is healthy
// again, and the requests Envoy then sends it are the probes). After a
// push it waits PushInterval before the next, so a flapping deployment
// costs Envoy at most one cluster update per interval, its changes
// coalesced. Without Health it returns at once.
func (s *Server) Run(ctx context.Context) {
	if s.health == nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
		case <-s.after(s.every):
		}
		if !s.syncHealth(ctx) {
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-s.after(s.every):
		}
	}
}

// syncHealth pushes the configuration in force again if Health changed
// which of its deployments are down, and reports whether it pushed.
func (s *Server) syncHealth(ctx context.Context) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cfg == nil || s.health == nil {
		return false
	}
	if slices.Equal(s.unhealthy(s.cfg), slices.Sorted(slices.Values(s.down))) {
		return false // asked every interval: nothing to build for no change
	}
	before := s.version
	if err := s.publish(ctx, s.cfg, "pushing deployment health to envoy"); err != nil {
		// The configuration was served before: only the cache can fail.
		s.log.Error("pushing deployment health to envoy", "error", err)
		return false
	}
	return s.version != before
}

// unhealthy is, sorted, the deployments of cfg with an endpoint that Health
// says are not available: what MarkUnhealthy would mark, without building
// the clusters.
func (s *Server) unhealthy(cfg *config.Config) []string {
	var down []string
	for i := range cfg.Models {
		eps, err := ModelEndpoints(cfg, &cfg.Models[i])
		if err != nil {
			continue // not in force: Update refused it
		}
		for _, e := range eps {
			if !s.health.Available(e.Deployment.ID) {
				down = append(down, e.Deployment.ID)
			}
		}
	}
	slices.Sort(down)
	return down
}

// publish builds cfg's resources with the deployments' health and sets
// them as the snapshot if they changed. The caller holds s.mu.
func (s *Server) publish(ctx context.Context, cfg *config.Config, msg string) error {
	res, err := Build(cfg, s.lis)
	if err != nil {
		return err
	}
	down := MarkUnhealthy(res.Clusters, s.health)
	version, err := Version(res)
	if err != nil {
		return err
	}
	if version == s.version {
		s.cfg = cfg
		return nil
	}
	snap, err := snapshotOf(res, version)
	if err != nil {
		return err
	}
	if err := s.cache.SetSnapshot(ctx, NodeGroup, snap); err != nil {
		return fmt.Errorf("xds: setting snapshot %s: %w", version, err)
	}
	s.log.Info(msg, "version", version, "previous", s.version, "clusters", len(res.Clusters), "unhealthy", down, "unhealthy_before", s.down)
	s.cfg, s.version, s.down = cfg, version, down
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
