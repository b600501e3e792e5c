package envoy_test

import (
	"fmt"
	"path/filepath"
	"testing"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	ondemandv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/on_demand/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/envoy/xds"
)

// The Kubernetes Services the mesh examples (the Helm chart's output for
// release "tollgate" in namespace "tollgate") name: every replica's gRPC
// port (headless), and the dashboard.
const (
	meshService   = "tollgate-grpc"
	meshFQDN      = "tollgate-grpc.tollgate.svc.cluster.local"
	dashboardFQDN = "tollgate.tollgate.svc.cluster.local"
)

// byKind indexes a file's Kubernetes objects by kind and name.
func byKind(t *testing.T, path string) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for _, d := range yamlDocs(t, path) {
		kind, _ := field(d, "kind").(string)
		name, _ := field(d, "metadata", "name").(string)
		require.NotEmpty(t, kind, "%s: an object without kind", path)
		require.NotEmpty(t, name, "%s: a %s without a name", path, kind)
		if out[kind] == nil {
			out[kind] = map[string]any{}
		}
		out[kind][name] = d
	}
	return out
}

func decodeValid(t *testing.T, v any, m proto.Message) {
	t.Helper()
	require.NoError(t, decodeInto(v, m), "%T", m)
	_, err := validateDeep(m)
	require.NoError(t, err, "%T", m)
}

// checkGRPCCluster: the cluster the examples add reaches Tollgate's gRPC
// port under the name the xDS model clusters use.
func checkGRPCCluster(t *testing.T, v any) {
	t.Helper()
	var c clusterv3.Cluster
	decodeValid(t, v, &c)
	assert.Equal(t, contract.ClusterGRPC, c.GetName())
	sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	assert.Equal(t, meshFQDN, sa.GetAddress())
	assert.EqualValues(t, contract.DefaultGRPCPort, sa.GetPortValue())
}

// checkOnDemand: on-demand CDS asks Tollgate (delta xDS, which
// xds.Server.Register serves).
func checkOnDemand(t *testing.T, f *hcmv3.HttpFilter) {
	t.Helper()
	var od ondemandv3.OnDemand
	require.NoError(t, f.GetTypedConfig().UnmarshalTo(&od))
	src := od.GetOdcds().GetSource().GetApiConfigSource()
	assert.Equal(t, corev3.ApiConfigSource_DELTA_GRPC, src.GetApiType())
	require.Len(t, src.GetGrpcServices(), 1)
	assert.Equal(t, contract.ClusterGRPC, src.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName())
}

func TestIstioEnvoyFilterParsesAndFollowsTheContract(t *testing.T) {
	objs := byKind(t, filepath.Join("mesh", "istio-envoyfilter.yaml"))
	ef := objs["EnvoyFilter"]["tollgate-gateway"]
	require.NotNil(t, ef)
	patches, _ := field(ef, "spec", "configPatches").([]any)
	require.NotEmpty(t, patches)

	var filters []string
	clusters := 0
	for i, p := range patches {
		value := field(p, "patch", "value")
		switch applyTo := field(p, "applyTo"); applyTo {
		case "CLUSTER":
			checkGRPCCluster(t, value)
			clusters++
		case "HTTP_FILTER":
			assert.Equal(t, "INSERT_BEFORE", field(p, "patch", "operation"))
			assert.Equal(t, "envoy.filters.http.router", field(p, "match", "listener", "filterChain", "filter", "subFilter", "name"))
			var f hcmv3.HttpFilter
			decodeValid(t, value, &f)
			filters = append(filters, f.GetName())
			switch f.GetName() {
			case "envoy.filters.http.ext_authz":
				var a extauthzv3.ExtAuthz
				require.NoError(t, f.GetTypedConfig().UnmarshalTo(&a))
				assert.Equal(t, contract.ClusterGRPC, a.GetGrpcService().GetEnvoyGrpc().GetClusterName())
				assert.True(t, proto.Equal(xds.GRPCRetryPolicy(), a.GetGrpcService().GetRetryPolicy()))
				assert.False(t, a.GetFailureModeAllow())
			case xds.FilterExtProc:
				var s extprocfilterv3.ExternalProcessor
				require.NoError(t, f.GetTypedConfig().UnmarshalTo(&s))
				want, err := xds.ProcessingMode(contract.RouterMode)
				require.NoError(t, err)
				assert.True(t, proto.Equal(want, s.GetProcessingMode()))
				assert.True(t, proto.Equal(xds.GRPCService(contract.StepRouter), s.GetGrpcService()))
			case "envoy.filters.http.on_demand":
				checkOnDemand(t, &f)
			}
		case "HTTP_ROUTE":
			// A MERGE value is a partial route: check the parts it sets.
			var r routev3.Route
			require.NoError(t, decodeInto(value, &r), "patch %d", i)
			if a := r.GetRoute(); a != nil {
				_, err := validateDeep(a)
				require.NoError(t, err)
				assert.Equal(t, contract.HeaderCluster, a.GetClusterHeader())
			}
			for name, cfg := range r.GetTypedPerFilterConfig() {
				_, err := validateDeep(cfg)
				require.NoError(t, err, name)
			}
		default:
			t.Errorf("patch %d: unexpected applyTo %v", i, applyTo)
		}
	}
	assert.Equal(t, 1, clusters)
	assert.Equal(t, []string{"envoy.filters.http.ext_authz", "envoy.filters.http.buffer", xds.FilterExtProc, "envoy.filters.http.on_demand"}, filters)

	// The VirtualService names the routes the patches match, and sends
	// them to Tollgate's Service.
	vs := objs["VirtualService"]["tollgate"]
	require.NotNil(t, vs)
	routes, _ := field(vs, "spec", "http").([]any)
	var names []string
	for _, r := range routes {
		names = append(names, fmt.Sprint(field(r, "name")))
		assert.Equal(t, dashboardFQDN, field(r, "route", 0, "destination", "host"))
	}
	assert.Equal(t, []string{"tollgate-api", "tollgate-dashboard"}, names)
	assert.EqualValues(t, contract.UpstreamAttempts-1, field(routes[0], "retries", "attempts"))
}

func TestEnvoyGatewayPoliciesParseAndFollowTheContract(t *testing.T) {
	objs := byKind(t, filepath.Join("mesh", "envoy-gateway.yaml"))

	backend := func(v any) {
		t.Helper()
		assert.Equal(t, meshService, field(v, "name"))
		assert.EqualValues(t, contract.DefaultGRPCPort, field(v, "port"))
	}
	sp := objs["SecurityPolicy"]["tollgate-authz"]
	require.NotNil(t, sp)
	backend(field(sp, "spec", "extAuth", "grpc", "backendRefs", 0))
	assert.Equal(t, false, field(sp, "spec", "extAuth", "failOpen"))
	assert.Equal(t, "tollgate-api", field(sp, "spec", "targetRefs", 0, "name"))

	ep := objs["EnvoyExtensionPolicy"]["tollgate-router-step"]
	require.NotNil(t, ep)
	backend(field(ep, "spec", "extProc", 0, "backendRefs", 0))
	assert.Equal(t, "Buffered", field(ep, "spec", "extProc", 0, "processingMode", "request", "body"), "contract.RouterMode buffers the request body")
	assert.NotNil(t, field(ep, "spec", "extProc", 0, "processingMode", "response"), "the router step sees response headers")
	assert.Nil(t, field(ep, "spec", "extProc", 0, "processingMode", "response", "body"))
	assert.Equal(t, false, field(ep, "spec", "extProc", 0, "failOpen"))
	assert.ElementsMatch(t, []any{contract.DynamicMetadataNamespace, contract.RequestMetadataNamespace},
		field(ep, "spec", "extProc", 0, "metadata", "writableNamespaces"))

	for name, r := range objs["HTTPRoute"] {
		assert.Equal(t, "tollgate", field(r, "spec", "rules", 0, "backendRefs", 0, "name"), name)
	}

	pp := objs["EnvoyPatchPolicy"]["tollgate-upstream"]
	require.NotNil(t, pp)
	patches, _ := field(pp, "spec", "jsonPatches").([]any)
	require.NotEmpty(t, patches)
	var sawCluster, sawOnDemand, sawHeader bool
	for _, p := range patches {
		value := field(p, "operation", "value")
		switch field(p, "type") {
		case "type.googleapis.com/envoy.config.cluster.v3.Cluster":
			checkGRPCCluster(t, value)
			sawCluster = true
		case "type.googleapis.com/envoy.config.listener.v3.Listener":
			var f hcmv3.HttpFilter
			decodeValid(t, value, &f)
			checkOnDemand(t, &f)
			sawOnDemand = true
		case "type.googleapis.com/envoy.config.route.v3.RouteConfiguration":
			switch field(p, "operation", "path") {
			case "/cluster_header":
				assert.Equal(t, contract.HeaderCluster, value)
				sawHeader = true
			case "/retry_policy":
				var rp routev3.RetryPolicy
				decodeValid(t, value, &rp)
				assert.EqualValues(t, contract.UpstreamAttempts-1, rp.GetNumRetries().GetValue())
			}
		}
	}
	assert.True(t, sawCluster && sawOnDemand && sawHeader, "cluster %v, on-demand %v, cluster header %v", sawCluster, sawOnDemand, sawHeader)
}
