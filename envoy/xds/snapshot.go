package xds

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/config"
)

// Snapshot builds the resources for cfg under the given version and checks
// that the snapshot is consistent. Only clusters travel over xDS; the
// listener and routes are static in the bootstrap, so nothing in the
// snapshot refers to anything outside it.
func Snapshot(cfg *config.Config, version string) (*cachev3.Snapshot, error) {
	clusters, err := Clusters(cfg)
	if err != nil {
		return nil, err
	}
	return snapshotOf(clusters, version)
}

func snapshotOf(clusters []*clusterv3.Cluster, version string) (*cachev3.Snapshot, error) {
	if version == "" {
		return nil, fmt.Errorf("%w: empty snapshot version", ErrConfig)
	}
	res := make([]types.Resource, len(clusters))
	for i, c := range clusters {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resource.Type][]types.Resource{resource.ClusterType: res})
	if err != nil {
		return nil, fmt.Errorf("xds: snapshot: %w", err)
	}
	if err := snap.Consistent(); err != nil {
		return nil, fmt.Errorf("xds: snapshot %s is inconsistent: %w", version, err)
	}
	return snap, nil
}

// Version names a set of clusters by its content: the same configuration
// gives the same version on every Tollgate replica, so an Envoy that moves
// from one replica's ADS stream to another's sees no change, and any change
// to what Envoy would receive gives a new version.
func Version(clusters []*clusterv3.Cluster) (string, error) {
	h := sha256.New()
	opts := proto.MarshalOptions{Deterministic: true}
	for _, c := range clusters {
		b, err := opts.Marshal(c)
		if err != nil {
			return "", fmt.Errorf("xds: hashing cluster %s: %w", c.GetName(), err)
		}
		// Length-prefix each cluster so boundaries count.
		fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
	}
	return "v1-" + hex.EncodeToString(h.Sum(nil))[:16], nil
}
