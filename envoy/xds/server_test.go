package xds

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	clusterservice "github.com/envoyproxy/go-control-plane/envoy/service/cluster/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/tollgate/tollgate/envoy/contract"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestSnapshotIsConsistentAndHoldsTheListenerRoutesAndClusters(t *testing.T) {
	snap, err := Snapshot(parse(t, testConfig), ListenerOptions{}, "v-test")
	require.NoError(t, err)
	require.NoError(t, snap.Consistent())
	assert.Len(t, snap.GetResources(resource.ClusterType), 2)
	assert.Len(t, snap.GetResources(resource.ListenerType), 1)
	assert.Contains(t, snap.GetResources(resource.RouteType), RouteConfigName)
	assert.Equal(t, "v-test", snap.GetVersion(resource.ClusterType))

	_, err = Snapshot(parse(t, testConfig), ListenerOptions{}, "")
	require.ErrorIs(t, err, ErrConfig)
}

func TestVersionFollowsContentOnly(t *testing.T) {
	a, err := Build(parse(t, testConfig), ListenerOptions{})
	require.NoError(t, err)
	b, err := Build(parse(t, testConfig), ListenerOptions{})
	require.NoError(t, err)
	va, err := Version(a)
	require.NoError(t, err)
	vb, err := Version(b)
	require.NoError(t, err)
	assert.Equal(t, va, vb, "two replicas with the same configuration agree")

	// Re-enabling Azure changes what Envoy receives, so the version.
	c, err := Build(parse(t, strings.Replace(testConfig, "enabled: false", "enabled: true", 1)), ListenerOptions{})
	require.NoError(t, err)
	vc, err := Version(c)
	require.NoError(t, err)
	assert.NotEqual(t, va, vc)
}

func TestUpdateWithChangedProvidersGivesANewVersion(t *testing.T) {
	ctx := context.Background()
	s := New(ctx, Options{Logger: quietLogger()})
	assert.Empty(t, s.Version())

	require.NoError(t, s.Update(ctx, parse(t, testConfig)))
	v1 := s.Version()
	require.NotEmpty(t, v1)
	snap, err := s.cache.GetSnapshot("any-node-at-all")
	require.Error(t, err, "the cache is keyed by NodeGroup, not node ids")
	assert.Nil(t, snap)
	snap, err = s.cache.GetSnapshot(NodeGroup)
	require.NoError(t, err)
	assert.Equal(t, v1, snap.GetVersion(resource.ClusterType))

	// The same configuration again changes nothing.
	require.NoError(t, s.Update(ctx, parse(t, testConfig)))
	assert.Equal(t, v1, s.Version())

	require.NoError(t, s.Update(ctx, parse(t, strings.Replace(testConfig, "https://api.anthropic.com", "https://anthropic.example.com", 1))))
	assert.NotEqual(t, v1, s.Version())
}

func TestUpdateWithAnUnservableConfigKeepsTheOldSnapshot(t *testing.T) {
	ctx := context.Background()
	s := New(ctx, Options{Logger: quietLogger()})
	require.NoError(t, s.Update(ctx, parse(t, testConfig)))
	v1 := s.Version()
	bad := strings.Replace(testConfig, "https://api.anthropic.com", "https://192.0.2.1", 1)
	require.ErrorIs(t, s.Update(ctx, parse(t, bad)), ErrConfig)
	assert.Equal(t, v1, s.Version())
	require.ErrorIs(t, s.Update(ctx, nil), ErrConfig)
}

// serveXDS runs an xDS server with the test configuration on a real gRPC
// listener and returns it with a client connection to it.
func serveXDS(ctx context.Context, t *testing.T) (*Server, *grpc.ClientConn) {
	t.Helper()
	s := New(ctx, Options{Logger: quietLogger()})
	require.NoError(t, s.Update(ctx, parse(t, testConfig)))
	g := grpc.NewServer()
	s.Register(g)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return s, conn
}

// TestADSServesClustersToAnyNode runs the ADS server on a real gRPC
// listener and talks to it as Envoy does: a state-of-the-world stream,
// a CDS request, an ACK, then a push after the configuration changes.
func TestADSServesClustersToAnyNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	s, conn := serveXDS(ctx, t)
	stream, err := discoverygrpc.NewAggregatedDiscoveryServiceClient(conn).StreamAggregatedResources(ctx)
	require.NoError(t, err)

	node := &corev3.Node{Id: "envoy-7f9c", Cluster: "whatever-the-bootstrap-says"}
	require.NoError(t, stream.Send(&discoverygrpc.DiscoveryRequest{Node: node, TypeUrl: resource.ClusterType}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	assert.Equal(t, resource.ClusterType, resp.GetTypeUrl())
	assert.Equal(t, s.Version(), resp.GetVersionInfo())
	names := clusterNames(t, resp)
	assert.ElementsMatch(t, []string{contract.ClusterName("gpt-4o"), contract.ClusterName("azure-only/model")}, names)

	// ACK, then change the providers: the open stream gets the new clusters.
	require.NoError(t, stream.Send(&discoverygrpc.DiscoveryRequest{
		Node: node, TypeUrl: resource.ClusterType, VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
	}))
	v1 := s.Version()
	require.NoError(t, s.Update(ctx, parse(t, strings.Replace(testConfig, "enabled: false", "enabled: true", 1))))
	resp, err = stream.Recv()
	require.NoError(t, err)
	assert.NotEqual(t, v1, resp.GetVersionInfo())
	assert.Equal(t, s.Version(), resp.GetVersionInfo())
	for _, r := range resp.GetResources() {
		var c clusterv3.Cluster
		require.NoError(t, r.UnmarshalTo(&c))
		if c.GetName() == contract.ClusterName("azure-only/model") {
			require.Len(t, endpointsOf(&c), 1, "the re-enabled provider now serves")
			assert.Equal(t, "example.openai.azure.com", endpointsOf(&c)[0].host)
		}
	}
}

// TestOnDemandCDSServesOneNamedCluster is what the mesh examples rely on:
// a gateway asks, over delta CDS, for the one cluster a request needs.
func TestOnDemandCDSServesOneNamedCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, conn := serveXDS(ctx, t)
	stream, err := clusterservice.NewClusterDiscoveryServiceClient(conn).DeltaClusters(ctx)
	require.NoError(t, err)
	want := contract.ClusterName("gpt-4o")
	require.NoError(t, stream.Send(&discoverygrpc.DeltaDiscoveryRequest{
		Node: &corev3.Node{Id: "istio-ingressgateway-abc"}, TypeUrl: resource.ClusterType,
		ResourceNamesSubscribe: []string{want},
	}))
	resp, err := stream.Recv()
	require.NoError(t, err)
	require.Len(t, resp.GetResources(), 1)
	var c clusterv3.Cluster
	require.NoError(t, resp.GetResources()[0].GetResource().UnmarshalTo(&c))
	assert.Equal(t, want, c.GetName())
}

func clusterNames(t *testing.T, resp *discoverygrpc.DiscoveryResponse) []string {
	t.Helper()
	var names []string
	for _, r := range resp.GetResources() {
		var c clusterv3.Cluster
		require.NoError(t, r.UnmarshalTo(&c))
		require.NoError(t, c.ValidateAll())
		names = append(names, c.GetName())
	}
	return names
}
