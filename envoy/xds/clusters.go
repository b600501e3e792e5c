// Package xds turns Tollgate's configuration into the Envoy resources that
// production Envoys receive over ADS, and serves them. Clusters and Snapshot
// are pure builders (tested without an Envoy); Server is the runner that
// registers ADS on Tollgate's gRPC server and pushes a new snapshot whenever
// the configuration changes, or a deployment's circuit (package health)
// opens or closes.
//
// Every public model becomes one cluster, contract.ClusterName(model.ID),
// with one endpoint per deployment of an enabled provider. The endpoint's
// priority is the deployment's priority rank, its load-balancing weight the
// deployment's weight, and its metadata names the deployment, so the upstream
// ext_proc step (which every cluster runs per attempt) knows which deployment
// Envoy picked. A model with one deployment (of an enabled provider) has a
// second cluster, contract.DirectClusterName(model.ID): the same endpoint
// without the upstream step, where the router step routes its requests
// ready-made (the router step's direct route: nothing to fail over to, so
// no step per attempt). A deployment whose circuit is open has its endpoint
// UNHEALTHY (MarkUnhealthy), so Envoy leaves it out. The endpoints stay
// inline (CDS, not EDS): an EDS endpoint must be an IP address, and the
// providers are host names that STRICT_DNS resolves. The listener, the
// filter chain in front of the router and the routes are static, in
// envoy/envoy.yaml.
package xds

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	mutationrulesv3 "github.com/envoyproxy/go-control-plane/envoy/config/common/mutation_rules/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	previoushostsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/host/previous_hosts/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

// Names Envoy knows these extensions and options by.
const (
	FilterExtProc        = "envoy.filters.http.ext_proc"
	FilterUpstreamCodec  = "envoy.filters.http.upstream_codec"
	TransportSocketTLS   = "envoy.transport_sockets.tls"
	HTTPProtocolOptions  = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
	TransportSocketMatch = "envoy.transport_socket_match"
	// TLSMatchKey marks, in an endpoint's TransportSocketMatch metadata,
	// the endpoints reached over TLS (providers with an https base_url).
	TLSMatchKey = "tls"
	// CABundle is the system CA bundle the official Envoy image (and
	// Debian-based images generally) carry.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Settings shared by every model cluster. Providers are remote, public and
// slow to answer the first byte of a long completion, so timeouts are about
// connecting, not about the length of an answer (the route has none).
const (
	connectTimeout     = 10 * time.Second
	dnsRefreshRate     = 30 * time.Second
	idleTimeout        = 5 * time.Minute
	outlierInterval    = 10 * time.Second
	outlierBaseEject   = 30 * time.Second
	outlierMaxEject    = 5 * time.Minute
	outlierConsec5xx   = 3 // as the built-in edge's circuit (package health's default)
	outlierConsecGwErr = 3
	// Circuit breakers: a provider answer holds a request (and, over
	// HTTP/1.1, a connection) for as long as it streams.
	maxConnections     = 4096
	maxPendingRequests = 4096
	maxRequests        = 4096
	maxRetries         = 256
)

// ErrConfig is wrapped by every error about a configuration the builders
// cannot turn into Envoy resources.
var ErrConfig = errors.New("xds: configuration cannot be served")

// Clusters builds one cluster per public model, in the configuration's
// order. Every cluster passes its ValidateAll.
func Clusters(cfg *config.Config) ([]*clusterv3.Cluster, error) {
	if cfg == nil {
		return nil, fmt.Errorf("%w: no configuration", ErrConfig)
	}
	upstreamOptions, err := upstreamHTTPOptions()
	if err != nil {
		return nil, err
	}
	directOptions, err := directHTTPOptions()
	if err != nil {
		return nil, err
	}
	tlsSocket, err := tlsTransportSocket()
	if err != nil {
		return nil, err
	}
	out := make([]*clusterv3.Cluster, 0, len(cfg.Models))
	names := make(map[string]string, len(cfg.Models))
	for i := range cfg.Models {
		m := &cfg.Models[i]
		name := contract.ClusterName(m.ID)
		if other, dup := names[name]; dup {
			return nil, fmt.Errorf("%w: models %q and %q map to the same cluster name %q", ErrConfig, other, m.ID, name)
		}
		names[name] = m.ID
		c, err := modelCluster(cfg, m, name, upstreamOptions, tlsSocket)
		if err != nil {
			return nil, err
		}
		if err := c.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%w: cluster %s (model %q): %v", ErrConfig, name, m.ID, err)
		}
		out = append(out, c)
		if _, _, ok := cfg.OnlyDeployment(m); ok {
			d, err := directCluster(cfg, m, directOptions, tlsSocket)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
	}
	return out, nil
}

// directCluster is the model's direct cluster, for a model served by one
// deployment: its endpoint without the upstream step, since the router
// step makes a request it routes there ready for that deployment.
func directCluster(cfg *config.Config, m *config.Model, directOptions *anypb.Any, tlsSocket *corev3.TransportSocket) (*clusterv3.Cluster, error) {
	name := contract.DirectClusterName(m.ID)
	c, err := modelCluster(cfg, m, name, directOptions, tlsSocket)
	if err != nil {
		return nil, err
	}
	if err := c.ValidateAll(); err != nil {
		return nil, fmt.Errorf("%w: cluster %s (model %q): %v", ErrConfig, name, m.ID, err)
	}
	return c, nil
}

// Endpoint is one enabled deployment of a model, located: what Envoy's
// cluster holds for it and what the built-in edge routes to. ModelEndpoints
// is the one place that builds them.
type Endpoint struct {
	Deployment *config.Deployment
	Provider   *config.Provider
	Host       string
	Port       uint32
	TLS        bool
}

// endpoint is the name this file's builders use.
type endpoint = Endpoint

// ModelEndpoints returns the endpoints of a model's enabled deployments, in
// the configuration's order (a disabled provider serves nothing).
func ModelEndpoints(cfg *config.Config, m *config.Model) ([]Endpoint, error) {
	var eps []Endpoint
	for j := range m.Deployments {
		d := &m.Deployments[j]
		p, ok := cfg.Provider(d.Provider)
		if !ok {
			return nil, fmt.Errorf("%w: model %q deployment %d names unknown provider %q", ErrConfig, m.ID, j, d.Provider)
		}
		if !p.IsEnabled() {
			continue
		}
		host, port, tls, err := locate(p.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("%w: provider %q: %v", ErrConfig, p.Name, err)
		}
		eps = append(eps, Endpoint{Deployment: d, Provider: p, Host: host, Port: port, TLS: tls})
	}
	return eps, nil
}

func modelCluster(cfg *config.Config, m *config.Model, name string, upstreamOptions *anypb.Any, tlsSocket *corev3.TransportSocket) (*clusterv3.Cluster, error) {
	eps, err := ModelEndpoints(cfg, m)
	if err != nil {
		return nil, err
	}
	// Envoy has one connect timeout per cluster: the longest of the
	// model's providers', so that none is cut short.
	var clusterConnect time.Duration
	for _, e := range eps {
		clusterConnect = max(clusterConnect, e.Provider.ConnectTimeout.D())
	}
	if clusterConnect <= 0 {
		clusterConnect = connectTimeout
	}

	anyTLS := false
	for _, e := range eps {
		anyTLS = anyTLS || e.TLS
	}

	c := &clusterv3.Cluster{
		Name: name,
		// STRICT_DNS: each deployment's host is resolved on its own (a
		// model's deployments are usually different hosts), and unlike
		// LOGICAL_DNS a cluster may hold many endpoints.
		ClusterDiscoveryType: &clusterv3.Cluster_Type{Type: clusterv3.Cluster_STRICT_DNS},
		DnsLookupFamily:      clusterv3.Cluster_V4_PREFERRED,
		//lint:ignore SA1019 Envoy 1.40 honours these; the typed DNS cluster (envoy.clusters.dns) is their successor
		DnsRefreshRate: durationpb.New(dnsRefreshRate),
		//lint:ignore SA1019 as DnsRefreshRate
		RespectDnsTtl:  true,
		ConnectTimeout: durationpb.New(clusterConnect),
		LbPolicy:       clusterv3.Cluster_ROUND_ROBIN,
		// No panic mode: when every deployment is ejected, Envoy answers
		// "no healthy upstream" at once (an OpenAI-shaped 503 after the
		// router step) instead of sending traffic to dead hosts anyway.
		CommonLbConfig: &clusterv3.Cluster_CommonLbConfig{HealthyPanicThreshold: &typev3.Percent{Value: 0}},
		LoadAssignment: &endpointv3.ClusterLoadAssignment{
			ClusterName: name,
			Endpoints:   localities(eps),
		},
		Metadata: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{
			contract.MetadataNamespace: {Fields: map[string]*structpb.Value{"model": structpb.NewStringValue(m.ID)}},
		}},
		TypedExtensionProtocolOptions: map[string]*anypb.Any{HTTPProtocolOptions: upstreamOptions},
		OutlierDetection: &clusterv3.OutlierDetection{
			Consecutive_5Xx:                    wrapperspb.UInt32(outlierConsec5xx),
			ConsecutiveGatewayFailure:          wrapperspb.UInt32(outlierConsecGwErr),
			EnforcingConsecutive_5Xx:           wrapperspb.UInt32(100),
			EnforcingConsecutiveGatewayFailure: wrapperspb.UInt32(100),
			Interval:                           durationpb.New(outlierInterval),
			BaseEjectionTime:                   durationpb.New(outlierBaseEject),
			MaxEjectionTime:                    durationpb.New(outlierMaxEject),
			MaxEjectionPercent:                 wrapperspb.UInt32(100),
		},
		CircuitBreakers: &clusterv3.CircuitBreakers{Thresholds: []*clusterv3.CircuitBreakers_Thresholds{{
			Priority:           corev3.RoutingPriority_DEFAULT,
			MaxConnections:     wrapperspb.UInt32(maxConnections),
			MaxPendingRequests: wrapperspb.UInt32(maxPendingRequests),
			MaxRequests:        wrapperspb.UInt32(maxRequests),
			MaxRetries:         wrapperspb.UInt32(maxRetries),
		}}},
	}
	if anyTLS {
		// Endpoints of one cluster may be different hosts, some plain
		// http: the TLS socket applies to the endpoints marked for it, and
		// takes SNI and the certificate's expected name from the
		// endpoint's own hostname (auto_host_sni, auto_sni_san_validation).
		c.TransportSocketMatches = []*clusterv3.Cluster_TransportSocketMatch{{
			Name:            TLSMatchKey,
			Match:           &structpb.Struct{Fields: map[string]*structpb.Value{TLSMatchKey: structpb.NewBoolValue(true)}},
			TransportSocket: tlsSocket,
		}}
	}
	return c, nil
}

// MarkUnhealthy marks UNHEALTHY the endpoint of every deployment health
// says is not available (its circuit is open), and returns their ids in
// the clusters' order. Envoy's load balancer leaves such an endpoint out:
// its model's requests go to the deployments left in its priority, or to
// the next priority; with none left (and no panic mode) Envoy answers 503
// itself. A nil health marks nothing.
func MarkUnhealthy(clusters []*clusterv3.Cluster, health Health) []string {
	if health == nil {
		return nil
	}
	var down []string
	for _, c := range clusters {
		for _, l := range c.GetLoadAssignment().GetEndpoints() {
			for _, e := range l.GetLbEndpoints() {
				id := e.GetMetadata().GetFilterMetadata()[contract.MetadataNamespace].GetFields()[contract.MetadataDeploymentKey].GetStringValue()
				if id != "" && !health.Available(id) {
					e.HealthStatus = corev3.HealthStatus_UNHEALTHY
					down = append(down, id)
				}
			}
		}
	}
	return down
}

// localities groups the endpoints by priority. Envoy wants priorities
// 0..N without gaps, so the configuration's priorities (any non-negative
// numbers, some of them perhaps on disabled providers only) are replaced by
// their rank: the lowest present becomes 0, the next 1, and so on.
func localities(eps []endpoint) []*endpointv3.LocalityLbEndpoints {
	var prios []int
	for _, e := range eps {
		if !slices.Contains(prios, e.Deployment.Priority) {
			prios = append(prios, e.Deployment.Priority)
		}
	}
	slices.Sort(prios)
	out := make([]*endpointv3.LocalityLbEndpoints, len(prios))
	for rank, prio := range prios {
		out[rank] = &endpointv3.LocalityLbEndpoints{Priority: uint32(rank)}
		for _, e := range eps {
			if e.Deployment.Priority == prio {
				out[rank].LbEndpoints = append(out[rank].LbEndpoints, lbEndpoint(e))
			}
		}
	}
	return out
}

func lbEndpoint(e endpoint) *endpointv3.LbEndpoint {
	meta := map[string]*structpb.Struct{
		contract.MetadataNamespace: {Fields: map[string]*structpb.Value{
			contract.MetadataDeploymentKey: structpb.NewStringValue(e.Deployment.ID),
		}},
	}
	if e.TLS {
		meta[TransportSocketMatch] = &structpb.Struct{Fields: map[string]*structpb.Value{
			TLSMatchKey: structpb.NewBoolValue(true),
		}}
	}
	return &endpointv3.LbEndpoint{
		HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address:       e.Host,
				PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.Port},
			}}},
			Hostname: e.Host,
		}},
		Metadata:            &corev3.Metadata{FilterMetadata: meta},
		LoadBalancingWeight: wrapperspb.UInt32(uint32(e.Deployment.Weight)),
	}
}

// locate reads the host, port and scheme of a provider's base URL.
func locate(baseURL string) (host string, port uint32, tls bool, err error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return "", 0, false, fmt.Errorf("base_url: %v", err)
	}
	switch u.Scheme {
	case "https":
		tls, port = true, 443
	case "http":
		port = 80
	default:
		return "", 0, false, fmt.Errorf("base_url %q: scheme must be http or https", baseURL)
	}
	host = u.Hostname()
	if host == "" {
		return "", 0, false, fmt.Errorf("base_url %q has no host", baseURL)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return "", 0, false, fmt.Errorf("base_url %q: bad port", baseURL)
		}
		port = uint32(n)
	}
	if ip := net.ParseIP(host); ip != nil && tls {
		// An address has no name to send as SNI or to check the
		// certificate against.
		return "", 0, false, fmt.Errorf("base_url %q: an https provider needs a host name, not an address", baseURL)
	}
	return host, port, tls, nil
}

// upstreamHTTPOptions is every model cluster's HTTP protocol options: plain
// HTTP/1.1 to the provider (every provider and every OpenAI-compatible
// server speaks it, over TLS or not), and the per-attempt filter chain: the
// upstream ext_proc step, then the codec.
func upstreamHTTPOptions() (*anypb.Any, error) {
	mode, err := ProcessingMode(contract.UpstreamMode)
	if err != nil {
		return nil, err
	}
	step := &extprocfilterv3.ExternalProcessor{
		GrpcService:       GRPCService(contract.StepUpstream),
		FailureModeAllow:  false,
		ProcessingMode:    mode,
		AllowModeOverride: true,
		MessageTimeout:    durationpb.New(contract.MessageTimeout),
		RequestAttributes: []string{contract.AttrUpstreamHostMetadata},
		MetadataOptions: &extprocfilterv3.MetadataOptions{
			// The router step's state reaches every attempt, even after an
			// earlier attempt removed the internal headers.
			ForwardingNamespaces: &extprocfilterv3.MetadataOptions_MetadataNamespaces{
				Untyped: []string{contract.RequestMetadataNamespace},
			},
			ReceivingNamespaces: &extprocfilterv3.MetadataOptions_MetadataNamespaces{
				Untyped: []string{contract.DynamicMetadataNamespace},
			},
		},
		// The step sets :authority (and :path) for the deployment Envoy
		// picked, and removes what Envoy added that is not the provider's
		// business (x-envoy-external-address: the client's address;
		// x-envoy-attempt-count); Envoy ignores mutations of routing and
		// x-envoy-* headers unless allowed (and counts them in
		// ext_proc.rejected_header_mutations).
		MutationRules: &mutationrulesv3.HeaderMutationRules{AllowAllRouting: wrapperspb.Bool(true), AllowEnvoy: wrapperspb.Bool(true)},
	}
	stepAny, err := pack(step)
	if err != nil {
		return nil, err
	}
	return httpOptions(&hcmv3.HttpFilter{Name: FilterExtProc, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: stepAny}})
}

// directHTTPOptions is every direct cluster's HTTP protocol options:
// upstreamHTTPOptions' without the upstream step.
func directHTTPOptions() (*anypb.Any, error) {
	return httpOptions()
}

// httpOptions is a model cluster's HTTP protocol options: plain HTTP/1.1
// to the provider, the idle timeout, and the upstream filters, then the
// codec.
func httpOptions(filters ...*hcmv3.HttpFilter) (*anypb.Any, error) {
	codecAny, err := pack(&upstreamcodecv3.UpstreamCodec{})
	if err != nil {
		return nil, err
	}
	return pack(&upstreamhttpv3.HttpProtocolOptions{
		CommonHttpProtocolOptions: &corev3.HttpProtocolOptions{IdleTimeout: durationpb.New(idleTimeout)},
		UpstreamProtocolOptions: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_{
			ExplicitHttpConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig{
				ProtocolConfig: &upstreamhttpv3.HttpProtocolOptions_ExplicitHttpConfig_HttpProtocolOptions{
					HttpProtocolOptions: &corev3.Http1ProtocolOptions{},
				},
			},
		},
		HttpFilters: append(filters, &hcmv3.HttpFilter{Name: FilterUpstreamCodec, ConfigType: &hcmv3.HttpFilter_TypedConfig{TypedConfig: codecAny}}),
	})
}

func tlsTransportSocket() (*corev3.TransportSocket, error) {
	ctx, err := pack(&tlsv3.UpstreamTlsContext{
		CommonTlsContext: &tlsv3.CommonTlsContext{
			AlpnProtocols: []string{"http/1.1"},
			ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{
				ValidationContext: &tlsv3.CertificateValidationContext{
					TrustedCa: &corev3.DataSource{Specifier: &corev3.DataSource_Filename{Filename: CABundle}},
				},
			},
		},
		AutoHostSni:          true,
		AutoSniSanValidation: true,
	})
	if err != nil {
		return nil, err
	}
	return &corev3.TransportSocket{Name: TransportSocketTLS, ConfigType: &corev3.TransportSocket_TypedConfig{TypedConfig: ctx}}, nil
}

// GRPCService addresses Tollgate's gRPC server through the proxy's
// contract.ClusterGRPC cluster, naming the ext_proc step in the call's
// initial metadata, with GRPCRetryPolicy.
func GRPCService(step string) *corev3.GrpcService {
	return &corev3.GrpcService{
		TargetSpecifier: &corev3.GrpcService_EnvoyGrpc_{EnvoyGrpc: &corev3.GrpcService_EnvoyGrpc{ClusterName: contract.ClusterGRPC}},
		InitialMetadata: []*corev3.HeaderValue{{Key: contract.HeaderStep, Value: step}},
		RetryPolicy:     GRPCRetryPolicy(),
	}
}

// GRPCRetryPolicy moves a call to Tollgate that no replica saw to another
// replica: a replica that is stopping (it no longer accepts connections,
// and refuses new streams on the ones it has) or gone (SIGKILL) answers
// every new call with a connection failure or a refused stream until
// Envoy's health checks or outlier detection take it out. A call a
// replica began is never retried (a check counted against the rate limit,
// a step that holds money). listener.yaml's ext_authz and router step
// carry the same.
func GRPCRetryPolicy() *corev3.RetryPolicy {
	// The predicate has no fields: packed, it is its type URL alone.
	previousHosts := &anypb.Any{TypeUrl: "type.googleapis.com/" + string((&previoushostsv3.PreviousHostsPredicate{}).ProtoReflect().Descriptor().FullName())}
	return &corev3.RetryPolicy{
		RetryOn:    "connect-failure,refused-stream",
		NumRetries: wrapperspb.UInt32(2),
		// Envoy also makes MaxInterval each try's timeout (until the
		// answer begins): a short one fails checks that wait on the
		// database under load (504, ext_authz_error). The back-off itself
		// stays near BaseInterval for two retries.
		RetryBackOff: &corev3.BackoffStrategy{
			BaseInterval: durationpb.New(25 * time.Millisecond), MaxInterval: durationpb.New(contract.MessageTimeout),
		},
		RetryHostPredicate: []*corev3.RetryPolicy_RetryHostPredicate{{
			Name:       "envoy.retry_host_predicates.previous_hosts",
			ConfigType: &corev3.RetryPolicy_RetryHostPredicate_TypedConfig{TypedConfig: previousHosts},
		}},
		// Replicas are picked at random (envoy/envoy.yaml): ten picks
		// find one not tried yet all but surely.
		HostSelectionRetryMaxAttempts: 10,
	}
}

// ProcessingMode converts a contract mode into Envoy's ext_proc enums.
func ProcessingMode(m contract.Mode) (*extprocfilterv3.ProcessingMode, error) {
	header := func(field, s string) (extprocfilterv3.ProcessingMode_HeaderSendMode, error) {
		v, ok := extprocfilterv3.ProcessingMode_HeaderSendMode_value[s]
		if !ok {
			return 0, fmt.Errorf("%w: processing mode %s %q is not an Envoy header mode", ErrConfig, field, s)
		}
		return extprocfilterv3.ProcessingMode_HeaderSendMode(v), nil
	}
	body := func(field, s string) (extprocfilterv3.ProcessingMode_BodySendMode, error) {
		v, ok := extprocfilterv3.ProcessingMode_BodySendMode_value[s]
		if !ok {
			return 0, fmt.Errorf("%w: processing mode %s %q is not an Envoy body mode", ErrConfig, field, s)
		}
		return extprocfilterv3.ProcessingMode_BodySendMode(v), nil
	}
	var out extprocfilterv3.ProcessingMode
	var err error
	if out.RequestHeaderMode, err = header("request header", m.RequestHeader); err != nil {
		return nil, err
	}
	if out.ResponseHeaderMode, err = header("response header", m.ResponseHeader); err != nil {
		return nil, err
	}
	if out.RequestBodyMode, err = body("request body", m.RequestBody); err != nil {
		return nil, err
	}
	if out.ResponseBodyMode, err = body("response body", m.ResponseBody); err != nil {
		return nil, err
	}
	return &out, nil
}

// pack validates a message and wraps it in an Any, deterministically, so
// the same configuration always yields the same bytes (and the same
// version). A cluster's ValidateAll stops at an Any; validating here covers
// what is packed inside.
func pack(m proto.Message) (*anypb.Any, error) {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		if err := v.ValidateAll(); err != nil {
			return nil, fmt.Errorf("%w: %T: %v", ErrConfig, m, err)
		}
	}
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		return nil, fmt.Errorf("xds: packing %T: %w", m, err)
	}
	return a, nil
}
