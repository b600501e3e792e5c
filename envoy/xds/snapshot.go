package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/config"
)

// Resources is everything Envoy gets from Tollgate for a configuration:
// the public listener (LDS), its routes (RDS) and the model clusters (CDS).
type Resources struct {
	Listener *listenerv3.Listener
	Routes   *routev3.RouteConfiguration
	Clusters []*clusterv3.Cluster
}

// Build builds and validates the resources for cfg, the listener per opt.
func Build(cfg *config.Config, opt ListenerOptions) (Resources, error) {
	clusters, err := Clusters(cfg)
	if err != nil {
		return Resources{}, err
	}
	routes, err := Routes(cfg)
	if err != nil {
		return Resources{}, err
	}
	l, err := Listener(cfg, opt)
	if err != nil {
		return Resources{}, err
	}
	return Resources{Listener: l, Routes: routes, Clusters: clusters}, nil
}

// Snapshot builds the resources for cfg under the given version and checks
// that the snapshot is consistent: the listener names the route
// configuration, which is in it; the routes name the model clusters, which
// are too.
func Snapshot(cfg *config.Config, opt ListenerOptions, version string) (*cachev3.Snapshot, error) {
	res, err := Build(cfg, opt)
	if err != nil {
		return nil, err
	}
	return snapshotOf(res, version)
}

func snapshotOf(r Resources, version string) (*cachev3.Snapshot, error) {
	if version == "" {
		return nil, fmt.Errorf("%w: empty snapshot version", ErrConfig)
	}
	clusters := make([]types.Resource, len(r.Clusters))
	for i, c := range r.Clusters {
		clusters[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{
		resource.ClusterType:  clusters,
		resource.RouteType:    {r.Routes},
		resource.ListenerType: {r.Listener},
	})
	if err != nil {
		return nil, fmt.Errorf("xds: snapshot: %w", err)
	}
	if err := snap.Consistent(); err != nil {
		return nil, fmt.Errorf("xds: snapshot %s is inconsistent: %w", version, err)
	}
	return snap, nil
}

// Version names a set of resources by its content: the same configuration
// gives the same version on every Tollgate replica, so an Envoy that moves
// from one replica's ADS stream to another's sees no change, and any change
// to what Envoy would receive gives a new version.
func Version(r Resources) (string, error) {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	msgs := []proto.Message{r.Listener, r.Routes}
	for _, c := range r.Clusters {
		msgs = append(msgs, c)
	}
	for _, m := range msgs {
		b, err := opts.Marshal(m)
		if err != nil {
			return "", fmt.Errorf("xds: hashing resources: %w", err)
		}
		// Length-prefix each resource so boundaries count.
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return "v1-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}
