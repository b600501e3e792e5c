// Package local runs Tollgate's production topology on one machine without
// containers: one or more `tollgate serve --edge off` replicas with mutual
// TLS on their gRPC ports, and one Envoy started from the production
// bootstrap (envoy/envoy.yaml, the file docker compose mounts) with only its
// addresses, ports and certificate paths replaced. `make run-envoy` (command
// run-envoy) and the end-to-end suite under a real Envoy both start it from
// here.
package local

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"
)

// Addrs are what the bootstrap's addresses, ports and certificate paths
// become.
type Addrs struct {
	// GRPC are the Tollgate replicas' gRPC servers (host:port), the
	// endpoints of cluster tollgate_grpc.
	GRPC []string
	// HTTP are the replicas' HTTP listeners (the dashboard), the
	// endpoints of cluster tollgate_http.
	HTTP []string
	// Admin is Envoy's admin listener, host:port (port 0: any).
	Admin string
	// Certs is the directory `tollgate certs` wrote.
	Certs string
}

// The bootstrap's originals, each replaced by exact string replacement.
const (
	adminSocket = "socket_address: {address: 127.0.0.1, port_value: 9901}"
	grpcSocket  = "socket_address: {address: tollgate, port_value: 9001}"
	httpSocket  = "socket_address: {address: tollgate, port_value: 8081}"
	// One endpoint of a cluster's lb_endpoints, up to its socket address.
	endpointHead = "              - endpoint:\n                  address:\n                    "
	certsPrefix  = "{filename: /etc/tollgate-certs/"
)

// Bootstrap is envoy.yaml with exactly its addresses, ports and
// certificate paths replaced: Tollgate's one endpoint in each of
// tollgate_grpc and tollgate_http becomes one per replica. Each original
// must occur exactly as often as expected, so a changed bootstrap fails
// here rather than being started half-substituted.
func Bootstrap(src []byte, a Addrs) ([]byte, error) {
	out := string(src)
	admin, err := socket(a.Admin)
	if err != nil {
		return nil, fmt.Errorf("admin address: %w", err)
	}
	if out, err = replaceOnce(out, adminSocket, admin); err != nil {
		return nil, err
	}
	for _, c := range []struct {
		name, from string
		to         []string
	}{{"gRPC", grpcSocket, a.GRPC}, {"HTTP", httpSocket, a.HTTP}} {
		endpoints, err := endpointList(c.to)
		if err != nil {
			return nil, fmt.Errorf("the replicas' %s addresses: %w", c.name, err)
		}
		if out, err = replaceOnce(out, endpointHead+c.from, endpoints); err != nil {
			return nil, err
		}
	}
	if got := strings.Count(out, certsPrefix); got != 3 {
		return nil, fmt.Errorf("envoy.yaml names /etc/tollgate-certs/ %d times, want 3", got)
	}
	out = strings.ReplaceAll(out, certsPrefix, "{filename: "+filepath.ToSlash(a.Certs)+"/")
	return []byte(out), nil
}

// replaceOnce replaces from, which must occur exactly once in s.
func replaceOnce(s, from, to string) (string, error) {
	if got := strings.Count(s, from); got != 1 {
		return "", fmt.Errorf("envoy.yaml has %q %d times, want 1", from, got)
	}
	return strings.Replace(s, from, to, 1), nil
}

// endpointList is one lb_endpoints entry per address, at the bootstrap's
// indentation.
func endpointList(addrs []string) (string, error) {
	if len(addrs) == 0 {
		return "", fmt.Errorf("none given")
	}
	var b strings.Builder
	for i, a := range addrs {
		s, err := socket(a)
		if err != nil {
			return "", err
		}
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(endpointHead + s)
	}
	return b.String(), nil
}

// socket is host:port as the bootstrap writes a socket address, or
// unix:///path as a pipe address (Envoy and Tollgate side by side).
func socket(hostport string) (string, error) {
	if path, ok := strings.CutPrefix(hostport, "unix://"); ok {
		if path == "" {
			return "", fmt.Errorf("%q: want unix:///path", hostport)
		}
		return fmt.Sprintf("pipe: {path: %s}", path), nil
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return "", err
	}
	if host == "" || port == "" {
		return "", fmt.Errorf("%q: want host:port", hostport)
	}
	return fmt.Sprintf("socket_address: {address: %s, port_value: %s}", host, port), nil
}
