package bench

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	listenerv3 "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	matchingv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/matching/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	discoverygrpc "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/xds"
)

// The variants that change what Tollgate serves over xDS (the ext_authz
// and ext_proc filters' gRPC client and options) cannot be made in the
// bootstrap: for them the bench serves the same resources, edited, from
// the test process (benchXDS), and points the bootstrap's ADS there. The
// gRPC server behind Envoy is unchanged.

// grpcTarget is where the gRPC server behind an Envoy listens, and how.
type grpcTarget struct {
	addr      string // host:port or unix:///path
	certs     string // `tollgate certs`' directory
	plaintext bool
}

// resourceEdit changes the resources Tollgate serves for a variant.
type resourceEdit func(r *xds.Resources, t grpcTarget) error

// startBenchXDS serves cfg's resources, changed by edit, over ADS on
// loopback until the test ends, and returns the address.
func startBenchXDS(b testing.TB, cfg *config.Config, t grpcTarget, edit resourceEdit) string {
	res, err := xds.Build(cfg, xds.ListenerOptions{Address: "127.0.0.1:0"})
	require.NoError(b, err)
	require.NoError(b, edit(&res, t))
	clusters := make([]types.Resource, len(res.Clusters))
	for i, c := range res.Clusters {
		clusters[i] = c
	}
	snap, err := cachev3.NewSnapshot("1", map[resource.Type][]types.Resource{
		resource.ClusterType: clusters, resource.RouteType: {res.Routes}, resource.ListenerType: {res.Listener},
	})
	require.NoError(b, err)
	require.NoError(b, snap.Consistent())
	ctx, cancel := context.WithCancel(context.Background())
	cache := cachev3.NewSnapshotCache(true, cachev3.IDHash{}, quietLog{})
	require.NoError(b, cache.SetSnapshot(ctx, "tollgate-envoy", snap)) // envoy.yaml's node id
	g := grpc.NewServer()
	discoverygrpc.RegisterAggregatedDiscoveryServiceServer(g, serverv3.NewServer(ctx, cache, nil))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(b, err)
	go func() { _ = g.Serve(lis) }()
	b.Cleanup(func() {
		g.Stop()
		cancel()
	})
	return lis.Addr().String()
}

type quietLog struct{}

func (quietLog) Debugf(string, ...any) {}
func (quietLog) Infof(string, ...any)  {}
func (quietLog) Warnf(string, ...any)  {}
func (quietLog) Errorf(string, ...any) {}

// editFilters applies edit to the ext_authz and both ext_proc filters'
// configurations: the listener's, and every model cluster's upstream step.
func editFilters(r *xds.Resources, authz func(*extauthzv3.ExtAuthz), proc func(*extprocfilterv3.ExternalProcessor)) error {
	nf := r.Listener.GetFilterChains()[0].GetFilters()[0]
	var hcm hcmv3.HttpConnectionManager
	if err := nf.GetTypedConfig().UnmarshalTo(&hcm); err != nil {
		return err
	}
	if err := editHTTPFilters(hcm.HttpFilters, authz, proc); err != nil {
		return err
	}
	a, err := anypb.New(&hcm)
	if err != nil {
		return err
	}
	nf.ConfigType = &listenerv3.Filter_TypedConfig{TypedConfig: a}
	const key = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	for _, c := range r.Clusters {
		var opts upstreamhttpv3.HttpProtocolOptions
		if err := c.TypedExtensionProtocolOptions[key].UnmarshalTo(&opts); err != nil {
			return fmt.Errorf("cluster %s: %w", c.Name, err)
		}
		if err := editHTTPFilters(opts.HttpFilters, authz, proc); err != nil {
			return err
		}
		if c.TypedExtensionProtocolOptions[key], err = anypb.New(&opts); err != nil {
			return err
		}
	}
	return nil
}

func editHTTPFilters(fs []*hcmv3.HttpFilter, authz func(*extauthzv3.ExtAuthz), proc func(*extprocfilterv3.ExternalProcessor)) error {
	for _, f := range fs {
		var m proto.Message
		switch f.Name {
		case "envoy.filters.http.ext_authz":
			var a extauthzv3.ExtAuthz
			if err := f.GetTypedConfig().UnmarshalTo(&a); err != nil {
				return err
			}
			authz(&a)
			m = &a
		case xds.FilterExtProc:
			a, err := editExtProc(f.GetTypedConfig(), proc)
			if err != nil {
				return err
			}
			f.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}
			continue
		default:
			continue
		}
		a, err := anypb.New(m)
		if err != nil {
			return err
		}
		f.ConfigType = &hcmv3.HttpFilter_TypedConfig{TypedConfig: a}
	}
	return nil
}

// editExtProc edits an ext_proc filter's configuration, also when it is
// wrapped in a matcher (the router step's, which skips the replies made
// before it saw the request: ext_authz's, and its codec's refusals).
func editExtProc(a *anypb.Any, proc func(*extprocfilterv3.ExternalProcessor)) (*anypb.Any, error) {
	var wrapped matchingv3.ExtensionWithMatcher
	if a.MessageIs(&wrapped) {
		if err := a.UnmarshalTo(&wrapped); err != nil {
			return nil, err
		}
		inner, err := editExtProc(wrapped.GetExtensionConfig().GetTypedConfig(), proc)
		if err != nil {
			return nil, err
		}
		wrapped.ExtensionConfig.TypedConfig = inner
		return anypb.New(&wrapped)
	}
	var p extprocfilterv3.ExternalProcessor
	if err := a.UnmarshalTo(&p); err != nil {
		return nil, err
	}
	proc(&p)
	return anypb.New(&p)
}

// googleGRPC has ext_authz and ext_proc call the gRPC server through
// Envoy's Google gRPC client (gRPC C++), not its own (envoy_grpc).
func googleGRPC(r *xds.Resources, t grpcTarget) error {
	svc := func(old *corev3.GrpcService) *corev3.GrpcService {
		g := &corev3.GrpcService_GoogleGrpc{TargetUri: t.addr, StatPrefix: "tollgate"}
		if !t.plaintext {
			file := func(name string) *corev3.DataSource {
				return &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: filepath.Join(t.certs, name)}}
			}
			g.ChannelCredentials = &corev3.GrpcService_GoogleGrpc_ChannelCredentials{CredentialSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelCredentials_SslCredentials{
				SslCredentials: &corev3.GrpcService_GoogleGrpc_SslCredentials{
					RootCerts: file("ca.pem"), CertChain: file("client.pem"), PrivateKey: file("client-key.pem")}}}
			// The server's certificate names "tollgate", as envoy.yaml's sni.
			g.ChannelArgs = &corev3.GrpcService_GoogleGrpc_ChannelArgs{Args: map[string]*corev3.GrpcService_GoogleGrpc_ChannelArgs_Value{
				"grpc.ssl_target_name_override": {ValueSpecifier: &corev3.GrpcService_GoogleGrpc_ChannelArgs_Value_StringValue{StringValue: "tollgate"}}}}
		}
		return &corev3.GrpcService{TargetSpecifier: &corev3.GrpcService_GoogleGrpc_{GoogleGrpc: g},
			Timeout: old.GetTimeout(), InitialMetadata: old.GetInitialMetadata()}
	}
	return editFilters(r,
		func(a *extauthzv3.ExtAuthz) {
			a.Services = &extauthzv3.ExtAuthz_GrpcService{GrpcService: svc(a.GetGrpcService())}
		},
		func(p *extprocfilterv3.ExternalProcessor) { p.GrpcService = svc(p.GetGrpcService()) })
}

// sendBodyEarly sets ext_proc's send_body_without_waiting_for_header_response
// on both steps (it applies to STREAMED bodies: the upstream step's
// response body).
func sendBodyEarly(r *xds.Resources, _ grpcTarget) error {
	return editFilters(r, func(*extauthzv3.ExtAuthz) {},
		func(p *extprocfilterv3.ExternalProcessor) { p.SendBodyWithoutWaitingForHeaderResponse = true })
}

// noStreamRetry takes the retry policy off the ext_proc filters' gRPC
// service: Envoy then keeps no copy of what it sends on the stream for a
// retry (it keeps up to 64 KiB of every stream's messages while a retry
// policy is set, though a stream is retried only before its first answer).
func noStreamRetry(r *xds.Resources, _ grpcTarget) error {
	return editFilters(r, func(*extauthzv3.ExtAuthz) {},
		func(p *extprocfilterv3.ExternalProcessor) { p.GetGrpcService().RetryPolicy = nil })
}

// unchanged serves Tollgate's resources as they are, from the bench: the
// control for the variants above.
func unchanged(*xds.Resources, grpcTarget) error { return nil }
