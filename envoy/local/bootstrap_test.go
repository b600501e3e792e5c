package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"
)

func productionBootstrap(t *testing.T) []byte {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "envoy.yaml"))
	require.NoError(t, err)
	return src
}

// The Envoy that make run-envoy and the end-to-end suite start is the
// production bootstrap: the substitution touches no value but addresses,
// ports and certificate paths (compared on the parsed YAML, leaf by leaf).
func TestBootstrapChangesOnlyAddressesPortsAndCertificatePaths(t *testing.T) {
	src := productionBootstrap(t)
	out, err := Bootstrap(src, Addrs{GRPC: []string{"127.0.0.1:40001"}, HTTP: []string{"127.0.0.1:40002"}, Admin: "127.0.0.1:0", Certs: "/tmp/certs-x"})
	require.NoError(t, err)
	const (
		ep0  = ".load_assignment.endpoints.0.lb_endpoints.0.endpoint.address.socket_address."
		tls  = "static_resources.clusters.0.transport_socket.typed_config.common_tls_context."
		grpc = "static_resources.clusters.0"
		http = "static_resources.clusters.1"
	)
	require.Equal(t, map[string]string{
		"admin.address.socket_address.port_value":             "0",
		grpc + ep0 + "address":                                "127.0.0.1",
		grpc + ep0 + "port_value":                             "40001",
		http + ep0 + "address":                                "127.0.0.1",
		http + ep0 + "port_value":                             "40002",
		tls + "tls_certificates.0.certificate_chain.filename": "/tmp/certs-x/client.pem",
		tls + "tls_certificates.0.private_key.filename":       "/tmp/certs-x/client-key.pem",
		tls + "validation_context.trusted_ca.filename":        "/tmp/certs-x/ca.pem",
	}, diff(t, src, out))
}

// Two replicas: each of Tollgate's clusters gets one endpoint per replica,
// and nothing else changes.
func TestBootstrapWithTwoReplicasHasTwoEndpointsPerTollgateCluster(t *testing.T) {
	src := productionBootstrap(t)
	out, err := Bootstrap(src, Addrs{GRPC: []string{"127.0.0.1:40001", "127.0.0.1:40011"}, HTTP: []string{"127.0.0.1:40002", "127.0.0.1:40012"},
		Admin: "127.0.0.1:0", Certs: "/c"})
	require.NoError(t, err)
	changed := diff(t, src, out)
	const ep1 = ".load_assignment.endpoints.0.lb_endpoints.1"
	require.Equal(t, "map[endpoint:map[address:map[socket_address:map[address:127.0.0.1 port_value:40011]]]]", changed["static_resources.clusters.0"+ep1])
	require.Equal(t, "map[endpoint:map[address:map[socket_address:map[address:127.0.0.1 port_value:40012]]]]", changed["static_resources.clusters.1"+ep1])
	require.Len(t, changed, 10, "%v", changed)
}

// A bootstrap whose addresses moved, or an address that is not host:port,
// is refused rather than started half-substituted.
func TestBootstrapRefusesWhatItCannotSubstitute(t *testing.T) {
	src := productionBootstrap(t)
	ok := Addrs{GRPC: []string{"127.0.0.1:1"}, HTTP: []string{"127.0.0.1:2"}, Admin: "127.0.0.1:0", Certs: "/c"}
	_, err := Bootstrap([]byte(strings.Replace(string(src), "port_value: 9001", "port_value: 9002", 1)), ok)
	require.ErrorContains(t, err, "9001")
	_, err = Bootstrap([]byte(strings.Replace(string(src), "/etc/tollgate-certs/ca.pem", "/elsewhere/ca.pem", 1)), ok)
	require.ErrorContains(t, err, "/etc/tollgate-certs/ 2 times")
	for _, bad := range []Addrs{
		{GRPC: nil, HTTP: ok.HTTP, Admin: ok.Admin},
		{GRPC: []string{"tollgate"}, HTTP: ok.HTTP, Admin: ok.Admin},
		{GRPC: ok.GRPC, HTTP: ok.HTTP, Admin: ":0"},
	} {
		_, err := Bootstrap(src, bad)
		require.Error(t, err, "%+v", bad)
	}
}

// diff parses both and returns, by dotted path, every leaf of b that
// differs from a's (and every key or element only one of them has).
func diff(t *testing.T, a, b []byte) map[string]string {
	t.Helper()
	var before, after any
	require.NoError(t, yaml.Unmarshal(a, &before))
	require.NoError(t, yaml.Unmarshal(b, &after))
	out := map[string]string{}
	diffYAML("", before, after, out)
	return out
}

func diffYAML(path string, a, b any, out map[string]string) {
	join := func(k string) string {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			out[path] = fmt.Sprint(b)
			return
		}
		for k := range av {
			diffYAML(join(k), av[k], bv[k], out)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				out[join(k)] = fmt.Sprint(bv[k])
			}
		}
	case []any:
		bv, ok := b.([]any)
		if !ok {
			out[path] = fmt.Sprint(b)
			return
		}
		for i := range max(len(av), len(bv)) {
			switch {
			case i >= len(bv):
				out[join(strconv.Itoa(i))] = "<missing>"
			case i >= len(av):
				out[join(strconv.Itoa(i))] = fmt.Sprint(bv[i])
			default:
				diffYAML(join(strconv.Itoa(i)), av[i], bv[i], out)
			}
		}
	default:
		if fmt.Sprint(a) != fmt.Sprint(b) {
			out[path] = fmt.Sprint(b)
		}
	}
}

// TestBootstrapTakesAUnixSocketForTollgate: unix:///path becomes Envoy's
// pipe address (Envoy and Tollgate side by side, as the benchmark's
// sidecar variant runs them).
func TestBootstrapTakesAUnixSocketForTollgate(t *testing.T) {
	out, err := Bootstrap(productionBootstrap(t), Addrs{GRPC: []string{"unix:///run/tg.sock"}, HTTP: []string{"127.0.0.1:8081"},
		Admin: "127.0.0.1:0", Certs: "/c"})
	require.NoError(t, err)
	assert.Contains(t, string(out), "pipe: {path: /run/tg.sock}")
	_, err = Bootstrap(productionBootstrap(t), Addrs{GRPC: []string{"unix://"}, HTTP: []string{"127.0.0.1:8081"}, Admin: "127.0.0.1:0", Certs: "/c"})
	assert.Error(t, err)
}
