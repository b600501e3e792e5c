package xds

import (
	"strings"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	extprocfilterv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/ext_proc/v3"
	upstreamcodecv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/upstream_codec/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	upstreamhttpv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/upstreams/http/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

// testConfig has one model served by four deployments on four providers
// (one of them disabled), and one model served only by the disabled one.
const testConfig = `
providers:
  - name: openai
    type: openai
    base_url: https://api.openai.com/v1
    api_key: ${OPENAI_API_KEY}
  - name: azure
    type: azure
    base_url: https://example.openai.azure.com
    api_key: sk-azure
    enabled: false
  - name: local
    type: openai
    base_url: http://vllm:8000/v1
  - name: anthropic
    type: anthropic
    base_url: https://api.anthropic.com
    api_key: sk-ant
models:
  - id: gpt-4o
    max_tokens: 16384
    input_price_per_million: 2.50
    output_price_per_million: 10
    deployments:
      - {provider: openai, model: gpt-4o, priority: 0, weight: 3}
      - {provider: azure, model: gpt4o-prod, priority: 0}
      - {provider: local, model: llama, priority: 5}
      - {provider: anthropic, model: claude-sonnet-4-5, priority: 10, weight: 2}
  - id: azure-only/model
    max_tokens: 4096
    deployments:
      - {provider: azure, model: only}
plans:
  - name: default
    models: ["*"]
`

func parse(t *testing.T, text string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(text), func(name string) (string, bool) { return "sk-" + strings.ToLower(name), true })
	require.NoError(t, err)
	return cfg
}

func clusterByName(t *testing.T, cs []*clusterv3.Cluster, name string) *clusterv3.Cluster {
	t.Helper()
	for _, c := range cs {
		if c.GetName() == name {
			return c
		}
	}
	t.Fatalf("no cluster %q", name)
	return nil
}

type ep struct {
	prio       uint32
	deployment string
	host       string
	port       uint32
	weight     uint32
	tls        bool
}

func endpointsOf(c *clusterv3.Cluster) []ep {
	var out []ep
	for _, loc := range c.GetLoadAssignment().GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			meta := lb.GetMetadata().GetFilterMetadata()
			out = append(out, ep{
				prio:       loc.GetPriority(),
				deployment: meta[contract.MetadataNamespace].GetFields()[contract.MetadataDeploymentKey].GetStringValue(),
				host:       sa.GetAddress(),
				port:       sa.GetPortValue(),
				weight:     lb.GetLoadBalancingWeight().GetValue(),
				tls:        meta[TransportSocketMatch].GetFields()[TLSMatchKey].GetBoolValue(),
			})
		}
	}
	return out
}

func TestEveryModelBecomesAValidCluster(t *testing.T) {
	cs, err := Clusters(parse(t, testConfig))
	require.NoError(t, err)
	require.Len(t, cs, 2)
	assert.Equal(t, contract.ClusterName("gpt-4o"), cs[0].GetName())
	assert.Equal(t, contract.ClusterName("azure-only/model"), cs[1].GetName())
	for _, c := range cs {
		require.NoError(t, c.ValidateAll(), c.GetName())
		assert.Equal(t, clusterv3.Cluster_STRICT_DNS, c.GetType())
		assert.Equal(t, c.GetName(), c.GetLoadAssignment().GetClusterName())
		assert.NotNil(t, c.GetOutlierDetection())
		assert.NotEmpty(t, c.GetCircuitBreakers().GetThresholds())
	}
}

func TestEndpointsCarryPriorityWeightAndDeployment(t *testing.T) {
	cfg := parse(t, testConfig)
	cs, err := Clusters(cfg)
	require.NoError(t, err)
	got := endpointsOf(clusterByName(t, cs, contract.ClusterName("gpt-4o")))
	// Priorities 0, 5 and 10 become ranks 0, 1 and 2 (Envoy wants no
	// gaps); the disabled Azure deployment is absent.
	want := []ep{
		{prio: 0, deployment: "gpt-4o#openai/gpt-4o", host: "api.openai.com", port: 443, weight: 3, tls: true},
		{prio: 1, deployment: "gpt-4o#local/llama", host: "vllm", port: 8000, weight: 1, tls: false},
		{prio: 2, deployment: "gpt-4o#anthropic/claude-sonnet-4-5", host: "api.anthropic.com", port: 443, weight: 2, tls: true},
	}
	assert.Equal(t, want, got)
	// The metadata names the deployment exactly as config assigns it.
	_, d, p, ok := cfg.Deployment(got[2].deployment)
	require.True(t, ok)
	assert.Equal(t, "anthropic", p.Name)
	assert.Equal(t, "claude-sonnet-4-5", d.Model)
}

func TestDisabledProviderContributesNoEndpoints(t *testing.T) {
	cs, err := Clusters(parse(t, testConfig))
	require.NoError(t, err)
	c := clusterByName(t, cs, contract.ClusterName("azure-only/model"))
	// The cluster exists (so the route finds it and Envoy answers "no
	// healthy upstream", which the router step turns into 503
	// no_available_workers) but has nothing in it.
	assert.Empty(t, endpointsOf(c))
	for _, e := range endpointsOf(clusterByName(t, cs, contract.ClusterName("gpt-4o"))) {
		assert.NotEqual(t, "example.openai.azure.com", e.host)
	}
}

func TestHTTPSEndpointsGetTLSWithTheirOwnSNI(t *testing.T) {
	cs, err := Clusters(parse(t, testConfig))
	require.NoError(t, err)
	c := clusterByName(t, cs, contract.ClusterName("gpt-4o"))
	for _, lb := range c.GetLoadAssignment().GetEndpoints() {
		for _, e := range lb.GetLbEndpoints() {
			// SNI comes from the endpoint's hostname.
			assert.Equal(t, e.GetEndpoint().GetAddress().GetSocketAddress().GetAddress(), e.GetEndpoint().GetHostname())
		}
	}
	require.Len(t, c.GetTransportSocketMatches(), 1)
	m := c.GetTransportSocketMatches()[0]
	assert.True(t, m.GetMatch().GetFields()[TLSMatchKey].GetBoolValue())
	assert.Equal(t, TransportSocketTLS, m.GetTransportSocket().GetName())
	var tls tlsv3.UpstreamTlsContext
	require.NoError(t, m.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tls))
	assert.True(t, tls.GetAutoHostSni())
	assert.True(t, tls.GetAutoSniSanValidation())
	assert.Empty(t, tls.GetSni(), "one SNI for the whole cluster would be wrong for all but one host")
	assert.Equal(t, CABundle, tls.GetCommonTlsContext().GetValidationContext().GetTrustedCa().GetFilename())
	assert.Nil(t, c.GetTransportSocket(), "plain-http endpoints keep the default socket")

	// A cluster of plain-http endpoints only has no TLS at all.
	plain := parse(t, `
providers:
  - {name: local, type: openai, base_url: "http://127.0.0.1:8000/v1"}
models:
  - id: m
    max_tokens: 10
    deployments: [{provider: local, model: m}]
plans: [{name: p, models: ["*"]}]
`)
	cs, err = Clusters(plain)
	require.NoError(t, err)
	assert.Empty(t, cs[0].GetTransportSocketMatches())
}

func TestClusterRunsTheUpstreamStepPerAttempt(t *testing.T) {
	cs, err := Clusters(parse(t, testConfig))
	require.NoError(t, err)
	for _, c := range cs {
		var opts upstreamhttpv3.HttpProtocolOptions
		require.NoError(t, c.GetTypedExtensionProtocolOptions()[HTTPProtocolOptions].UnmarshalTo(&opts))
		require.NoError(t, opts.ValidateAll())
		filters := opts.GetHttpFilters()
		require.Len(t, filters, 2)
		assert.Equal(t, FilterExtProc, filters[0].GetName())
		assert.Equal(t, FilterUpstreamCodec, filters[1].GetName(), "the codec must be the last upstream filter")
		require.NoError(t, filters[1].GetTypedConfig().UnmarshalTo(&upstreamcodecv3.UpstreamCodec{}))

		var step extprocfilterv3.ExternalProcessor
		require.NoError(t, filters[0].GetTypedConfig().UnmarshalTo(&step))
		require.NoError(t, step.ValidateAll())
		md := step.GetGrpcService().GetInitialMetadata()
		require.Len(t, md, 1)
		assert.Equal(t, contract.HeaderStep, md[0].GetKey())
		assert.Equal(t, contract.StepUpstream, md[0].GetValue())
		assert.Equal(t, contract.ClusterGRPC, step.GetGrpcService().GetEnvoyGrpc().GetClusterName())
		mode := step.GetProcessingMode()
		assert.Equal(t, contract.UpstreamMode, contract.Mode{
			RequestHeader:  mode.GetRequestHeaderMode().String(),
			RequestBody:    mode.GetRequestBodyMode().String(),
			ResponseHeader: mode.GetResponseHeaderMode().String(),
			ResponseBody:   mode.GetResponseBodyMode().String(),
		})
		assert.True(t, step.GetAllowModeOverride())
		assert.False(t, step.GetFailureModeAllow())
		assert.Equal(t, []string{contract.AttrUpstreamHostMetadata}, step.GetRequestAttributes())
		assert.Equal(t, []string{contract.DynamicMetadataNamespace}, step.GetMetadataOptions().GetReceivingNamespaces().GetUntyped())
		assert.Equal(t, []string{contract.RequestMetadataNamespace}, step.GetMetadataOptions().GetForwardingNamespaces().GetUntyped())
		assert.True(t, step.GetMutationRules().GetAllowAllRouting().GetValue(), "the step rewrites :authority")
	}
}

func TestBaseURLsThatCannotBeServed(t *testing.T) {
	tests := []struct {
		name, baseURL string
		wantHost      string
		wantPort      uint32
		wantTLS       bool
		wantErr       string
	}{
		{name: "https default port", baseURL: "https://api.openai.com/v1", wantHost: "api.openai.com", wantPort: 443, wantTLS: true},
		{name: "http default port", baseURL: "http://ollama", wantHost: "ollama", wantPort: 80},
		{name: "explicit port", baseURL: "https://gw.example.com:8443", wantHost: "gw.example.com", wantPort: 8443, wantTLS: true},
		{name: "ipv6 http", baseURL: "http://[::1]:8000/v1", wantHost: "::1", wantPort: 8000},
		{name: "https to an address", baseURL: "https://10.0.0.1/v1", wantErr: "host name"},
		{name: "ftp", baseURL: "ftp://x", wantErr: "scheme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			host, port, tls, err := locate(tt.baseURL)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantHost, host)
			assert.Equal(t, tt.wantPort, port)
			assert.Equal(t, tt.wantTLS, tls)
		})
	}
}

func TestProcessingModeRejectsUnknownNames(t *testing.T) {
	_, err := ProcessingMode(contract.Mode{RequestHeader: "SEND", RequestBody: "SOMETIMES", ResponseHeader: "SEND", ResponseBody: "NONE"})
	require.ErrorIs(t, err, ErrConfig)
	m, err := ProcessingMode(contract.RouterMode)
	require.NoError(t, err)
	assert.Equal(t, extprocfilterv3.ProcessingMode_BUFFERED, m.GetRequestBodyMode())
}

func TestLocalitiesHaveNoPriorityGaps(t *testing.T) {
	cs, err := Clusters(parse(t, testConfig))
	require.NoError(t, err)
	for _, c := range cs {
		for i, loc := range c.GetLoadAssignment().GetEndpoints() {
			assert.Equal(t, uint32(i), loc.GetPriority())
			assert.NotEmpty(t, loc.GetLbEndpoints())
			for _, lb := range loc.GetLbEndpoints() {
				_, ok := lb.GetHostIdentifier().(*endpointv3.LbEndpoint_Endpoint)
				assert.True(t, ok)
			}
		}
	}
}

// With every deployment ejected, Envoy must answer 503 at once rather than
// fall back to sending traffic to the dead hosts (its 50% panic default).
func TestClustersHaveNoPanicMode(t *testing.T) {
	clusters, err := Clusters(parse(t, testConfig))
	require.NoError(t, err)
	require.NotEmpty(t, clusters)
	for _, c := range clusters {
		require.NotNil(t, c.GetCommonLbConfig().GetHealthyPanicThreshold(), c.GetName())
		assert.Zero(t, c.GetCommonLbConfig().GetHealthyPanicThreshold().GetValue(), c.GetName())
	}
}

func TestAClustersConnectTimeoutIsTheLongestOfItsProviders(t *testing.T) {
	text := strings.Replace(testConfig, "    api_key: sk-ant\n", "    api_key: sk-ant\n    connect_timeout: 7s\n", 1)
	text = strings.Replace(text, "    base_url: http://vllm:8000/v1\n", "    base_url: http://vllm:8000/v1\n    connect_timeout: 2s\n", 1)
	cs, err := Clusters(parse(t, text))
	require.NoError(t, err)
	assert.Equal(t, 7*time.Second, clusterByName(t, cs, contract.ClusterName("gpt-4o")).GetConnectTimeout().AsDuration())

	cs, err = Clusters(parse(t, testConfig))
	require.NoError(t, err)
	assert.Equal(t, config.DefaultConnectTimeout, clusterByName(t, cs, contract.ClusterName("gpt-4o")).GetConnectTimeout().AsDuration())
}

// A model served by one deployment has a direct cluster besides its own:
// the same endpoint, with no upstream step (the router step makes the
// request ready for that deployment); a model with several has none, nor
// one whose only deployment's provider is disabled. A deployment whose
// circuit is open is UNHEALTHY in both.
func TestAModelWithOneDeploymentGetsADirectClusterWithoutTheUpstreamStep(t *testing.T) {
	cfg := parse(t, strings.Replace(testConfig, "plans:", `  - id: solo
    max_tokens: 100
    deployments:
      - {provider: local, model: solo}
plans:`, 1))
	cs, err := Clusters(cfg)
	require.NoError(t, err)
	var names []string
	for _, c := range cs {
		names = append(names, c.GetName())
	}
	assert.Equal(t, []string{contract.ClusterName("gpt-4o"), contract.ClusterName("azure-only/model"),
		contract.ClusterName("solo"), contract.DirectClusterName("solo")}, names)

	direct := clusterByName(t, cs, contract.DirectClusterName("solo"))
	require.NoError(t, direct.ValidateAll())
	assert.Equal(t, endpointsOf(clusterByName(t, cs, contract.ClusterName("solo"))), endpointsOf(direct))
	var opts upstreamhttpv3.HttpProtocolOptions
	require.NoError(t, direct.GetTypedExtensionProtocolOptions()[HTTPProtocolOptions].UnmarshalTo(&opts))
	require.Len(t, opts.GetHttpFilters(), 1, "no upstream step")
	assert.Equal(t, FilterUpstreamCodec, opts.GetHttpFilters()[0].GetName())
	assert.NotNil(t, opts.GetExplicitHttpConfig().GetHttpProtocolOptions(), "HTTP/1.1 to the provider, as every model cluster")

	down := MarkUnhealthy(cs, downHealth{"solo#local/solo": true})
	assert.Equal(t, []string{"solo#local/solo", "solo#local/solo"}, down, "the model's cluster and its direct one")
}

// downHealth says the deployments it holds are not available.
type downHealth map[string]bool

func (h downHealth) Available(id string) bool { return !h[id] }
