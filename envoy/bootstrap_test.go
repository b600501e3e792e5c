package envoy_test

import (
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	matchingv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/matching/v3"
	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	extauthzv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_authz/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	headermutationv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/header_mutation/v3"
	hcmv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	previousprioritiesv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/retry/priority/previous_priorities/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	matcherv3 "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/envoy/xds"
	"github.com/tollgate/tollgate/oaierror"
)

// loadBootstrap decodes a bootstrap file into Envoy's proto and validates
// it, packed extensions included.
func loadBootstrap(t *testing.T, path string) *bootstrapv3.Bootstrap {
	t.Helper()
	docs := yamlDocs(t, path)
	require.Len(t, docs, 1, "%s: one bootstrap per file", path)
	var b bootstrapv3.Bootstrap
	require.NoError(t, decodeInto(docs[0], &b), path)
	_, err := validateDeep(&b)
	require.NoError(t, err, path)
	return &b
}

func TestEveryEnvoyYAMLIsAValidBootstrap(t *testing.T) {
	files, err := filepath.Glob("*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(f, func(t *testing.T) {
			loadBootstrap(t, f)
		})
	}
}

// bootstrapParts is what the contract tests look at.
type bootstrapParts struct {
	b        *bootstrapv3.Bootstrap
	hcm      *hcmv3.HttpConnectionManager
	filters  []*hcmv3.HttpFilter
	routes   map[string]*routev3.Route // by name
	clusters map[string]*clusterv3.Cluster
	res      xds.Resources
}

// exampleConfig is a configuration with two models, one served by two
// providers, for the resources Tollgate serves over xDS.
const exampleConfig = `
providers:
  - {name: openai, type: openai, base_url: "https://api.openai.com/v1", api_key: sk, first_byte_timeout: 20s}
  - {name: claude, type: anthropic, base_url: "https://api.anthropic.com", api_key: sk, first_byte_timeout: 90s, stream_idle_timeout: 45s}
models:
  - id: gpt-4o
    max_tokens: 16384
    request_timeout: 3m
    deployments:
      - {provider: openai, model: gpt-4o}
      - {provider: claude, model: claude-sonnet-4-5, priority: 1}
  - id: mini
    max_tokens: 16384
    deployments:
      - {provider: openai, model: gpt-4o-mini}
plans:
  - {name: pro, models: ["*"]}
`

// parts reads the bootstrap and the listener and routes Tollgate serves it
// over xDS for exampleConfig, validated as Envoy would.
func parts(t *testing.T) bootstrapParts {
	t.Helper()
	b := loadBootstrap(t, "envoy.yaml")
	p := bootstrapParts{b: b, routes: map[string]*routev3.Route{}, clusters: map[string]*clusterv3.Cluster{}}
	require.Empty(t, b.GetStaticResources().GetListeners(), "the listener comes over LDS")
	require.NotNil(t, b.GetDynamicResources().GetLdsConfig().GetAds(), "LDS on the ADS stream")
	cfg, err := config.Parse([]byte(exampleConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	res, err := xds.Build(cfg, xds.ListenerOptions{})
	require.NoError(t, err)
	_, err = validateDeep(res.Listener)
	require.NoError(t, err, "listener")
	_, err = validateDeep(res.Routes)
	require.NoError(t, err, "routes")
	p.res = res
	l := res.Listener
	require.Len(t, l.GetFilterChains(), 1)
	nf := l.GetFilterChains()[0].GetFilters()
	require.Len(t, nf, 1)
	p.hcm = &hcmv3.HttpConnectionManager{}
	require.NoError(t, nf[0].GetTypedConfig().UnmarshalTo(p.hcm))
	p.filters = p.hcm.GetHttpFilters()
	require.Equal(t, xds.RouteConfigName, p.hcm.GetRds().GetRouteConfigName())
	require.NotNil(t, p.hcm.GetRds().GetConfigSource().GetAds(), "RDS on the ADS stream")
	require.Equal(t, xds.RouteConfigName, res.Routes.GetName())
	for _, vh := range res.Routes.GetVirtualHosts() {
		for _, r := range vh.GetRoutes() {
			p.routes[r.GetName()] = r
		}
	}
	for _, c := range b.GetStaticResources().GetClusters() {
		p.clusters[c.GetName()] = c
	}
	return p
}

func (p bootstrapParts) filter(t *testing.T, name string, m proto.Message) {
	t.Helper()
	for _, f := range p.filters {
		if f.GetName() == name {
			typed := f.GetTypedConfig()
			var wrapped matchingv3.ExtensionWithMatcher
			if typed.MessageIs(&wrapped) { // a filter some replies skip
				require.NoError(t, typed.UnmarshalTo(&wrapped))
				typed = wrapped.GetExtensionConfig().GetTypedConfig()
			}
			require.NoError(t, typed.UnmarshalTo(m))
			return
		}
	}
	t.Fatalf("no HTTP filter %q", name)
}

func TestBootstrapFilterChainOrder(t *testing.T) {
	p := parts(t)
	var names []string
	for _, f := range p.filters {
		names = append(names, f.GetName())
	}
	// Key check first (nothing is buffered for a stranger), then the body
	// cap, then the router step, then the router.
	assert.Equal(t, []string{
		"envoy.filters.http.header_mutation",
		"envoy.filters.http.ext_authz",
		"envoy.filters.http.buffer",
		xds.FilterExtProc,
		"envoy.filters.http.router",
	}, names)
	assert.Equal(t, uint32(8080), p.res.Listener.GetAddress().GetSocketAddress().GetPortValue())
	assert.True(t, p.hcm.GetUseRemoteAddress().GetValue(), "the peer address is the client's")
	assert.Nil(t, p.hcm.GetInternalAddressConfig(), "no client is internal: Envoy removes the x-envoy-* controls clients send")
	assert.Equal(t, hcmv3.HttpConnectionManager_AUTO, p.hcm.GetCodecType(), "HTTP/1.1 and HTTP/2")
}

func TestBootstrapAuthzFailsClosed(t *testing.T) {
	p := parts(t)
	var authz extauthzv3.ExtAuthz
	p.filter(t, "envoy.filters.http.ext_authz", &authz)
	assert.False(t, authz.GetFailureModeAllow())
	assert.Equal(t, corev3.ApiVersion_V3, authz.GetTransportApiVersion())
	assert.Equal(t, contract.ClusterGRPC, authz.GetGrpcService().GetEnvoyGrpc().GetClusterName())
	assert.Nil(t, authz.GetWithRequestBody(), "the key check needs no body")
	var allowed []string
	for _, m := range authz.GetAllowedHeaders().GetPatterns() {
		require.NotEmpty(t, m.GetExact(), "exact names only: %v", m)
		assert.False(t, m.GetIgnoreCase())
		allowed = append(allowed, m.GetExact())
	}
	assert.ElementsMatch(t, contract.CheckHeaders, allowed, "the check gets the headers it reads, and no other")
	assert.EqualValues(t, 503, authz.GetStatusOnError().GetCode())
	assert.True(t, proto.Equal(xds.GRPCRetryPolicy(), authz.GetGrpcService().GetRetryPolicy()),
		"a check no replica saw goes to another, as the ext_proc steps' calls do: %v", authz.GetGrpcService().GetRetryPolicy())
}

func TestTheBodyLimitIsTheConfigurations(t *testing.T) {
	p := parts(t)
	var buf bufferv3.Buffer
	p.filter(t, "envoy.filters.http.buffer", &buf)
	assert.EqualValues(t, config.DefaultMaxBodyBytes, buf.GetMaxRequestBytes().GetValue(), "the default")

	cfg, err := config.Parse([]byte("max_body_bytes: 1048576\n"+exampleConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	l, err := xds.Listener(cfg, xds.ListenerOptions{})
	require.NoError(t, err)
	var hcm hcmv3.HttpConnectionManager
	require.NoError(t, l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm))
	for _, f := range hcm.GetHttpFilters() {
		if f.GetName() == "envoy.filters.http.buffer" {
			require.NoError(t, f.GetTypedConfig().UnmarshalTo(&buf))
		}
	}
	assert.EqualValues(t, 1<<20, buf.GetMaxRequestBytes().GetValue(), "max_body_bytes, served over LDS")
	assert.EqualValues(t, 1<<20/8, l.GetPerConnectionBufferLimitBytes().GetValue(),
		"what Envoy buffers while ext_authz runs stays under half of max_body_bytes, so that reading resumes under the buffer filter, which refuses an oversize body (else Envoy's flow control stalls it for good)")
}

func TestBootstrapRouterStepFollowsTheContract(t *testing.T) {
	p := parts(t)
	var step extprocfilterv3.ExternalProcessor
	p.filter(t, xds.FilterExtProc, &step)
	want, err := xds.ProcessingMode(contract.RouterMode)
	require.NoError(t, err)
	assert.True(t, proto.Equal(want, step.GetProcessingMode()), "processing mode %v, contract says %v", step.GetProcessingMode(), want)
	assert.True(t, proto.Equal(xds.GRPCService(contract.StepRouterDirect), step.GetGrpcService()),
		"the router step's gRPC service must name cluster %s and carry %s: %s (this Envoy has the direct clusters)",
		contract.ClusterGRPC, contract.HeaderStep, contract.StepRouterDirect)
	assert.Equal(t, []string{contract.AttrCodeDetails}, step.GetResponseAttributes(), "a request routed straight tells Envoy's replies by it")
	assert.True(t, step.GetMutationRules().GetAllowAllRouting().GetValue(), "a request routed straight gets its deployment's :path and :authority")
	assert.True(t, step.GetAllowModeOverride())
	assert.False(t, step.GetFailureModeAllow())
	assert.Equal(t, contract.MessageTimeout, step.GetMessageTimeout().AsDuration(), "the default 200ms is too short for a store lookup")
	assert.LessOrEqual(t, contract.StepDeadline, contract.MessageTimeout-time.Second, "a step answers a slow database itself, well before Envoy's timeout")
	assert.ElementsMatch(t, []string{contract.DynamicMetadataNamespace, contract.RequestMetadataNamespace},
		step.GetMetadataOptions().GetReceivingNamespaces().GetUntyped())
}

func TestBootstrapRoutesByTheClusterHeader(t *testing.T) {
	p := parts(t)
	for _, name := range []string{"chat-completions", "models", "responses", "messages", "count-tokens", "api-other"} {
		r := p.routes[name]
		require.NotNil(t, r, name)
		assert.Equal(t, contract.HeaderCluster, r.GetRoute().GetClusterHeader(), name)
	}
	assert.Equal(t, contract.PathChatCompletions, p.routes["chat-completions"].GetMatch().GetPath())
	assert.Equal(t, contract.PathModels, p.routes["models"].GetMatch().GetPath())
	assert.Equal(t, contract.PathResponses, p.routes["responses"].GetMatch().GetPath())
	assert.Equal(t, contract.PathMessages, p.routes["messages"].GetMatch().GetPath())
	assert.Equal(t, contract.PathCountTokens, p.routes["count-tokens"].GetMatch().GetPath())

	chat := p.routes["chat-completions"].GetRoute()
	// The configuration's default timeouts: the whole request, one attempt
	// until its headers, the longest silence of an answer.
	assert.Equal(t, config.DefaultRequestTimeout, chat.GetTimeout().AsDuration())
	rp := chat.GetRetryPolicy()
	assert.Equal(t, config.DefaultFirstByteTimeout, rp.GetPerTryTimeout().AsDuration())
	assert.Equal(t, config.DefaultStreamIdleTimeout, rp.GetPerTryIdleTimeout().AsDuration())
	assert.EqualValues(t, contract.UpstreamAttempts-1, rp.GetNumRetries().GetValue())
	for _, on := range []string{"connect-failure", "refused-stream", "reset", "5xx", "retriable-status-codes"} {
		assert.Contains(t, strings.Split(rp.GetRetryOn(), ","), on)
	}
	assert.Equal(t, []uint32{429}, rp.GetRetriableStatusCodes())
	require.Len(t, rp.GetRetryHostPredicate(), 1)
	assert.Equal(t, "envoy.retry_host_predicates.previous_hosts", rp.GetRetryHostPredicate()[0].GetName())
	assert.Greater(t, rp.GetHostSelectionRetryMaxAttempts(), int64(1))
	assert.Equal(t, "envoy.retry_priorities.previous_priorities", rp.GetRetryPriority().GetName())
	var prio previousprioritiesv3.PreviousPrioritiesConfig
	require.NoError(t, rp.GetRetryPriority().GetTypedConfig().UnmarshalTo(&prio))
	assert.EqualValues(t, 1, prio.GetUpdateFrequency())

	// Each model has its own route, before the template, sized by its
	// configuration: gpt-4o has two deployments (one retry), a 3m request
	// timeout and its providers' longest first-byte and idle timeouts;
	// mini has one deployment (no retry), the default request and idle timeouts and its provider's first-byte timeout.
	var names []string
	for _, r := range p.res.Routes.GetVirtualHosts()[0].GetRoutes() {
		names = append(names, r.GetName())
	}
	gpt, mini := contract.ClusterName("gpt-4o"), contract.ClusterName("mini")
	assert.Equal(t, []string{gpt, mini, contract.DirectClusterName("mini"), "chat-completions"}, names[:4],
		"mini, with one deployment, has its direct route too; gpt-4o, with two, has none")

	// The direct route: any path (the router step set the deployment's),
	// matched by the direct cluster's name alone, with the model's
	// timeouts and no retry; the cluster header and Envoy's attempt count
	// go before the request leaves.
	direct := p.routes[contract.DirectClusterName("mini")]
	require.NotNil(t, direct)
	assert.Equal(t, "/", direct.GetMatch().GetPrefix())
	require.Len(t, direct.GetMatch().GetHeaders(), 1)
	assert.Equal(t, contract.DirectClusterName("mini"), direct.GetMatch().GetHeaders()[0].GetStringMatch().GetExact())
	assert.Equal(t, contract.DirectClusterName("mini"), direct.GetRoute().GetCluster())
	assert.Equal(t, p.routes[mini].GetRoute().GetTimeout().AsDuration(), direct.GetRoute().GetTimeout().AsDuration())
	drp := direct.GetRoute().GetRetryPolicy()
	assert.Zero(t, drp.GetNumRetries().GetValue())
	assert.Empty(t, drp.GetRetryOn(), "no retry state: Envoy keeps no body for a retry")
	assert.Empty(t, drp.GetRetryHostPredicate())
	assert.Nil(t, drp.GetRetryPriority())
	assert.Equal(t, p.routes[mini].GetRoute().GetRetryPolicy().GetPerTryTimeout().AsDuration(), drp.GetPerTryTimeout().AsDuration(), "the first-byte timeout")
	assert.Equal(t, p.routes[mini].GetRoute().GetRetryPolicy().GetPerTryIdleTimeout().AsDuration(), drp.GetPerTryIdleTimeout().AsDuration(), "the idle timeout")
	assert.Positive(t, drp.GetPerTryTimeout().AsDuration())
	assert.ElementsMatch(t, []string{contract.HeaderCluster, contract.HeaderForwardedProto, contract.HeaderAttemptCount}, direct.GetRequestHeadersToRemove())
	for _, tt := range []struct {
		cluster                  string
		retries                  uint32
		timeout, firstByte, idle time.Duration
	}{
		{gpt, 1, 3 * time.Minute, 90 * time.Second, 60 * time.Second},
		{mini, 0, config.DefaultRequestTimeout, 20 * time.Second, config.DefaultStreamIdleTimeout},
	} {
		r := p.routes[tt.cluster]
		require.NotNil(t, r, tt.cluster)
		re := regexp.MustCompile("^" + r.GetMatch().GetSafeRegex().GetRegex() + "$") // Envoy matches the whole path
		for _, path := range []string{contract.PathChatCompletions, contract.PathMessages, contract.PathResponses} {
			assert.True(t, re.MatchString(path), "%s serves %s", tt.cluster, path)
		}
		for _, path := range []string{contract.PathCountTokens, contract.PathModels, "/v1/responsesx", "/v1/messagesx"} {
			assert.False(t, re.MatchString(path), "%s does not serve %s", tt.cluster, path)
		}
		require.Len(t, r.GetMatch().GetHeaders(), 1)
		assert.Equal(t, contract.HeaderCluster, r.GetMatch().GetHeaders()[0].GetName())
		assert.Equal(t, tt.cluster, r.GetMatch().GetHeaders()[0].GetStringMatch().GetExact())
		assert.Equal(t, tt.cluster, r.GetRoute().GetCluster())
		assert.Equal(t, tt.timeout, r.GetRoute().GetTimeout().AsDuration(), tt.cluster)
		rp := r.GetRoute().GetRetryPolicy()
		assert.EqualValues(t, tt.retries, rp.GetNumRetries().GetValue(), tt.cluster)
		assert.Equal(t, tt.firstByte, rp.GetPerTryTimeout().AsDuration(), tt.cluster)
		assert.Equal(t, tt.idle, rp.GetPerTryIdleTimeout().AsDuration(), tt.cluster)
		assert.Equal(t, "envoy.retry_host_predicates.previous_hosts", rp.GetRetryHostPredicate()[0].GetName(), "the template's policy")
	}

	// The dashboard route skips the API-key filters, by their names in
	// the chain.
	dash := p.routes["dashboard"]
	require.NotNil(t, dash)
	assert.Equal(t, "tollgate_http", dash.GetRoute().GetCluster())
	for _, name := range []string{"envoy.filters.http.ext_authz", "envoy.filters.http.buffer", xds.FilterExtProc} {
		assert.Contains(t, dash.GetTypedPerFilterConfig(), name)
	}
}

func TestBootstrapAccessLogCarriesTheUsageMetadata(t *testing.T) {
	p := parts(t)
	require.Len(t, p.hcm.GetAccessLog(), 1)
	var out streamv3.StdoutAccessLog
	require.NoError(t, p.hcm.GetAccessLog()[0].GetTypedConfig().UnmarshalTo(&out))
	fields := out.GetLogFormat().GetJsonFormat().GetFields()
	require.NotEmpty(t, fields)
	assert.Equal(t, "%DYNAMIC_METADATA("+contract.DynamicMetadataNamespace+")%", fields["usage"].GetStringValue())
	assert.Equal(t, "%DYNAMIC_METADATA("+contract.RequestMetadataNamespace+":"+contract.MetaKeyID+")%",
		fields["request"].GetStructValue().GetFields()[contract.MetaKeyID].GetStringValue())
	for k, v := range fields {
		assert.NotContains(t, strings.ToLower(v.String()), "authorization", "field %s would log credentials", k)
	}
}

// TestTheAccessLogCannotPrintTheSignedToken: the router step's
// tollgate.request metadata holds an HMAC token that admits upstream
// attempts. The access log names only listed fields of it, and prints
// no metadata any other way (a whole namespace, METADATA(DYNAMIC:…), CEL).
func TestTheAccessLogCannotPrintTheSignedToken(t *testing.T) {
	p := parts(t)
	var out streamv3.StdoutAccessLog
	require.NoError(t, p.hcm.GetAccessLog()[0].GetTypedConfig().UnmarshalTo(&out))
	allowed := map[string]bool{"%DYNAMIC_METADATA(" + contract.DynamicMetadataNamespace + ")%": true}
	for _, f := range []string{contract.MetaKeyID, contract.MetaAccountID, contract.MetaRequestID, contract.MetaModel,
		contract.MetaStream, contract.MetaLease, contract.MetaHeld} {
		allowed["%DYNAMIC_METADATA("+contract.RequestMetadataNamespace+":"+f+")%"] = true
	}
	commands := formatCommands(structpb.NewStructValue(out.GetLogFormat().GetJsonFormat()))
	require.NotEmpty(t, commands)
	for _, c := range commands {
		if strings.Contains(c, "METADATA") || strings.HasPrefix(c, "%CEL") || strings.HasPrefix(c, "%FILTER_STATE") {
			assert.True(t, allowed[c], "the access log's %s may print the router step's token", c)
		}
		assert.NotContains(t, c, contract.MetaToken)
	}
	//lint:ignore SA1019 the deprecated field is the one a bootstrap could still set
	assert.NotContains(t, out.GetLogFormat().GetTextFormat(), "%", "no text format beside the JSON one")
}

// formatCommands lists the %COMMAND(…)% operators of a log format's values.
func formatCommands(v *structpb.Value) []string {
	switch k := v.GetKind().(type) {
	case *structpb.Value_StringValue:
		return regexp.MustCompile(`%[A-Z_]+(\([^)]*\))?(:[0-9]+)?%`).FindAllString(k.StringValue, -1)
	case *structpb.Value_StructValue:
		var all []string
		for _, f := range k.StructValue.GetFields() {
			all = append(all, formatCommands(f)...)
		}
		return all
	case *structpb.Value_ListValue:
		var all []string
		for _, f := range k.ListValue.GetValues() {
			all = append(all, formatCommands(f)...)
		}
		return all
	}
	return nil
}

func TestBootstrapReachesTollgateOverOneGRPCCluster(t *testing.T) {
	p := parts(t)
	c := p.clusters[contract.ClusterGRPC]
	require.NotNil(t, c, "static cluster %s", contract.ClusterGRPC)
	sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	assert.Equal(t, "tollgate", sa.GetAddress(), "the compose service")
	assert.EqualValues(t, contract.DefaultGRPCPort, sa.GetPortValue())
	var opts upstreamhttpv3.HttpProtocolOptions
	require.NoError(t, c.GetTypedExtensionProtocolOptions()[xds.HTTPProtocolOptions].UnmarshalTo(&opts))
	assert.NotNil(t, opts.GetExplicitHttpConfig().GetHttp2ProtocolOptions(), "gRPC needs HTTP/2")
	require.Len(t, c.GetHealthChecks(), 1)
	assert.NotNil(t, c.GetHealthChecks()[0].GetGrpcHealthCheck(), "grpc.health.v1, which Tollgate serves")

	ads := p.b.GetDynamicResources().GetAdsConfig()
	assert.Equal(t, corev3.ApiConfigSource_GRPC, ads.GetApiType())
	require.Len(t, ads.GetGrpcServices(), 1)
	assert.Equal(t, contract.ClusterGRPC, ads.GetGrpcServices()[0].GetEnvoyGrpc().GetClusterName())
	assert.NotNil(t, p.b.GetDynamicResources().GetCdsConfig().GetAds(), "clusters come over ADS")

	assert.Equal(t, "127.0.0.1", p.b.GetAdmin().GetAddress().GetSocketAddress().GetAddress(), "admin is local only")
}

func TestBootstrapRejectsNoUnknownModelClusterName(t *testing.T) {
	// Model clusters come from xDS; nothing static may use their prefix.
	p := parts(t)
	for name := range p.clusters {
		assert.False(t, strings.HasPrefix(name, contract.ClusterPrefix), name)
	}
	assert.True(t, slices.ContainsFunc(p.filters, func(f *hcmv3.HttpFilter) bool { return f.GetName() == xds.FilterExtProc }))
}

// Envoy's own replies reach the client in OpenAI's shape with package
// oaierror's words: Envoy runs the mappers on the router step's immediate
// responses too, so a mapper's body must be the one the step gives (a 5xx
// naming the request id, as ForRequest does). Envoy's own upstream
// failures are covered by flag, even where ext_proc skips local replies.
func TestBootstrapLocalRepliesAreOaierrorsBodies(t *testing.T) {
	p := parts(t)
	const id = "(request id: %REQ(X-REQUEST-ID)%)"
	want := map[string]oaierror.Error{
		"413": oaierror.BodyTooLarge, "500": oaierror.Internal, "UH": oaierror.NoAvailableWorkers, "504": oaierror.StepTimedOut,
	}
	seen := map[string]bool{}
	for _, m := range p.hcm.GetLocalReplyConfig().GetMappers() {
		if isAnthropic(m) {
			continue // TestTheMessagesAPIGetsEnvoysRepliesInAnthropicsShape
		}
		if m.GetBodyFormatOverride() == nil {
			continue // ext_authz's denials, marked only (TestTheRouterStepSkipsRepliesMadeBeforeIt)
		}
		f := m.GetFilter()
		key := strconv.Itoa(int(f.GetStatusCodeFilter().GetComparison().GetValue().GetDefaultValue()))
		if key == "0" {
			key = strconv.Itoa(int(m.GetStatusCode().GetValue()))
		}
		if flags := f.GetResponseFlagFilter().GetFlags(); slices.Contains(flags, "UH") {
			key = "UH"
			for _, f := range []string{"UF", "URX", "NC", "UT"} {
				assert.Contains(t, flags, f)
			}
			assert.Equal(t, uint32(503), m.GetStatusCode().GetValue())
		}
		e := m.GetBodyFormatOverride().GetJsonFormat().GetFields()["error"].GetStructValue().GetFields()
		require.NotNil(t, e, "mapper %s: a JSON error body", key)
		assert.Equal(t, "application/json", m.GetBodyFormatOverride().GetContentType())
		_, isNull := e["param"].GetKind().(*structpb.Value_NullValue)
		assert.True(t, isNull, "mapper %s: param is null", key)
		w, ok := want[key]
		if !ok {
			continue // ext_authz unreachable: no oaierror of its own
		}
		seen[key] = true
		msg := w.Message
		if w.Status >= 500 {
			msg += " " + id
		}
		assert.Equal(t, msg, e["message"].GetStringValue(), key)
		assert.Equal(t, w.Code, e["code"].GetStringValue(), key)
		assert.Equal(t, w.Type, e["type"].GetStringValue(), key)
	}
	assert.Len(t, seen, len(want), "a mapper for each of %v", want)
}

// isAnthropic: the mapper's body is in Anthropic's shape.
func isAnthropic(m *hcmv3.ResponseMapper) bool {
	return m.GetBodyFormatOverride().GetJsonFormat().GetFields()["type"].GetStringValue() == "error"
}

// TestTheMessagesAPIGetsEnvoysRepliesInAnthropicsShape: every reply Envoy
// makes itself in OpenAI's shape (but a codec's refusal, whose request
// may have no path to speak of) has a twin before all of them for the
// Messages API: the same filter and the Messages API's, the same status and
// headers, and the same error in Anthropic's shape, as oaierror's
// AnthropicBody writes it. A request is the Messages API's by its path or
// by ext_authz's note, which survives an attempt's rewriting of :path.
func TestTheMessagesAPIGetsEnvoysRepliesInAnthropicsShape(t *testing.T) {
	p := parts(t)
	mappers := p.hcm.GetLocalReplyConfig().GetMappers()
	var anthropic []*hcmv3.ResponseMapper
	firstOpenAI := -1
	for i, m := range mappers {
		if m.GetBodyFormatOverride() == nil {
			continue // ext_authz's denials, marked only: Tollgate wrote them in the path's shape
		}
		if isAnthropic(m) {
			assert.Equal(t, -1, firstOpenAI, "mapper %d: the Messages API's mappers come first", i)
			anthropic = append(anthropic, m)
		} else if firstOpenAI < 0 {
			firstOpenAI = i
		}
	}
	paired := 0
	for _, twin := range mappers[firstOpenAI:] {
		if strings.Contains(twin.GetFilter().String(), "http1.") {
			continue // a codec's refusal
		}
		i := slices.IndexFunc(anthropic, func(m *hcmv3.ResponseMapper) bool {
			return proto.Equal(m.GetFilter().GetAndFilter().GetFilters()[1], twin.GetFilter())
		})
		require.GreaterOrEqual(t, i, 0, "a Messages API twin of %v", twin.GetFilter())
		m := anthropic[i]
		paired++
		fs := m.GetFilter().GetAndFilter().GetFilters()
		require.Len(t, fs, 2)
		expr := fs[0].String()
		for _, word := range []string{"request.path", "^/v1/messages([/?].*)?$", contract.AuthzMetadataNamespace, contract.AuthzMetaShape, contract.ShapeAnthropic, "?"} {
			assert.Contains(t, expr, word, "the Messages API's filter")
		}
		assert.Equal(t, twin.GetStatusCode().GetValue(), m.GetStatusCode().GetValue())
		assert.True(t, proto.Equal(&hcmv3.ResponseMapper{HeadersToAdd: twin.GetHeadersToAdd()}, &hcmv3.ResponseMapper{HeadersToAdd: m.GetHeadersToAdd()}))
		assert.Equal(t, "application/json", m.GetBodyFormatOverride().GetContentType())

		e := twin.GetBodyFormatOverride().GetJsonFormat().GetFields()["error"].GetStructValue().GetFields()
		status := int(twin.GetStatusCode().GetValue())
		if status == 0 {
			status = int(twin.GetFilter().GetStatusCodeFilter().GetComparison().GetValue().GetDefaultValue())
		}
		want := oaierror.Error{Status: status, Code: e["code"].GetStringValue(), Type: e["type"].GetStringValue(), Message: e["message"].GetStringValue()}
		body, err := m.GetBodyFormatOverride().GetJsonFormat().MarshalJSON()
		require.NoError(t, err)
		assert.JSONEq(t, string(want.AnthropicBody()), string(body), "the twin of %s", want.Code)
	}
	assert.Equal(t, len(anthropic), paired, "every Messages API mapper has its twin")
	assert.Len(t, anthropic, 6, "413, ext_authz out of reach, a step's timeout, upstream failures, overload, 500")
}

// The Messages route's buffer holds what the router step hands back, as
// the Responses route's: contract.ConversationFactor times max_body_bytes.
func TestTheMessagesAndResponsesRoutesBufferWhatTheRouterStepHandsBack(t *testing.T) {
	p := parts(t)
	for _, name := range []string{"responses", "messages"} {
		var buf bufferv3.BufferPerRoute
		require.NoError(t, p.routes[name].GetTypedPerFilterConfig()["envoy.filters.http.buffer"].UnmarshalTo(&buf), name)
		assert.EqualValues(t, contract.ConversationFactor*config.DefaultMaxBodyBytes, buf.GetBuffer().GetMaxRequestBytes().GetValue(), name)
	}
	assert.Empty(t, p.routes["count-tokens"].GetTypedPerFilterConfig(), "max_body_bytes, the listener's")
}

// serve --envoy-listen and --xff-trusted-hops reach the listener Envoy is
// served; anything but IP:port is refused.
func TestTheListenerAddressAndTrustedHopsAreServed(t *testing.T) {
	cfg, err := config.Parse([]byte(exampleConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	l, err := xds.Listener(cfg, xds.ListenerOptions{Address: "127.0.0.1:18080", XFFTrustedHops: 2})
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1", l.GetAddress().GetSocketAddress().GetAddress())
	assert.EqualValues(t, 18080, l.GetAddress().GetSocketAddress().GetPortValue())
	var hcm hcmv3.HttpConnectionManager
	require.NoError(t, l.GetFilterChains()[0].GetFilters()[0].GetTypedConfig().UnmarshalTo(&hcm))
	assert.EqualValues(t, 2, hcm.GetXffNumTrustedHops())
	assert.True(t, hcm.GetUseRemoteAddress().GetValue())

	for _, bad := range []string{"envoy:8080", "127.0.0.1", "127.0.0.1:http", "127.0.0.1:70000"} {
		_, err := xds.Listener(cfg, xds.ListenerOptions{Address: bad})
		assert.Error(t, err, bad)
	}
}

// TestTheRouterStepSkipsRepliesMadeBeforeIt: the replies made before the
// router step saw the request are marked by their mappers — ext_authz's
// denials and its failures to reach Tollgate (so they cost no ext_proc
// stream), and the refusals of Envoy's codec (a reply waiting on ext_proc
// would be lost with the connection the codec error closes) — the router
// step's matcher skips the step on exactly that mark, and header_mutation,
// the last filter a reply passes, removes the mark.
func TestTheRouterStepSkipsRepliesMadeBeforeIt(t *testing.T) {
	p := parts(t)
	var marks []*corev3.HeaderValue
	var marked []string
	for _, m := range p.hcm.GetLocalReplyConfig().GetMappers() {
		for _, h := range m.GetHeadersToAdd() {
			if h.GetHeader().GetKey() == "retry-after" {
				assert.EqualValues(t, 503, m.GetStatusCode().GetValue(), "a Retry-After only on a 503")
				continue
			}
			marks = append(marks, h.GetHeader())
			marked = append(marked, m.GetFilter().String())
		}
	}
	require.NotEmpty(t, marks)
	for i, mark := range marks {
		assert.Equal(t, marks[0].String(), mark.String(), "one mark")
		switch f := marked[i]; {
		case strings.Contains(f, "http1."): // the codec's refusals
		case strings.Contains(f, "ext_authz_denied") && strings.Contains(f, "response.code != 500"):
			// ext_authz's denials, but its 500, which the internal_error
			// mappers rewrite
		case strings.Contains(f, "UAEX") && strings.Contains(f, "code_details != 'ext_authz_denied'"):
			// ext_authz could not reach Tollgate
		default:
			t.Errorf("a mapper marks replies that are neither ext_authz's nor the codec's: %s", f)
		}
	}
	assert.Len(t, marks, 4, "the codec's mapper, ext_authz's denials, and its failures in both shapes")

	var wrapped matchingv3.ExtensionWithMatcher
	var step *hcmv3.HttpFilter
	for _, f := range p.filters {
		if f.GetName() == xds.FilterExtProc {
			step = f
		}
	}
	require.NotNil(t, step)
	require.NoError(t, step.GetTypedConfig().UnmarshalTo(&wrapped), "the router step is wrapped in a matcher")
	matchers := wrapped.GetXdsMatcher().GetMatcherList().GetMatchers()
	require.Len(t, matchers, 1)
	pred := matchers[0].GetPredicate().GetSinglePredicate()
	var input matcherv3.HttpResponseHeaderMatchInput
	require.NoError(t, pred.GetInput().GetTypedConfig().UnmarshalTo(&input))
	assert.Equal(t, marks[0].GetKey(), input.GetHeaderName())
	assert.Equal(t, marks[0].GetValue(), pred.GetValueMatch().GetExact())
	assert.Equal(t, "type.googleapis.com/envoy.extensions.filters.common.matcher.action.v3.SkipFilter",
		matchers[0].GetOnMatch().GetAction().GetTypedConfig().GetTypeUrl())
	assert.Nil(t, wrapped.GetXdsMatcher().GetOnNoMatch(), "every other reply goes through the step")

	var hm headermutationv3.HeaderMutation
	p.filter(t, "envoy.filters.http.header_mutation", &hm)
	var removed []string
	for _, m := range hm.GetMutations().GetResponseMutations() {
		removed = append(removed, m.GetRemove())
	}
	assert.Contains(t, removed, marks[0].GetKey(), "the mark stays inside")
	assert.Equal(t, "envoy.filters.http.header_mutation", p.filters[0].GetName(), "the last filter a reply passes")
}
