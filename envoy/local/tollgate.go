package local

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"
)

// ReplicaOptions say how to start one `tollgate serve --edge off`.
type ReplicaOptions struct {
	Binary string // the tollgate executable
	Name   string // its log prefix; default "tollgate"
	Config string // --config
	DB     string // --db; empty: serve's default
	Redis  string // --redis; empty: the in-memory limiter
	// GRPC, HTTP and Admin are --grpc-listen, --listen and --admin-listen
	// (port 0: any; Ready reports the bound ones).
	GRPC, HTTP, Admin string
	// EnvoyListen is --envoy-listen: where the Envoys bind the public
	// listener served over xDS. Every replica gives the same.
	EnvoyListen string
	Certs       string   // the directory `tollgate certs` wrote
	Extra       []string // more serve flags
	Logs        io.Writer
}

// Replica is one running `tollgate serve --edge off`.
type Replica struct {
	Process
	// GRPC and HTTP are the bound addresses (host:port), known once Ready
	// returned.
	GRPC, HTTP string
	name       string
	up         chan [2]string
}

// readyLine is what serve prints, with --edge off, once it serves.
var readyLine = regexp.MustCompile(`dashboard at http://([^/\s]+)/.*gRPC for Envoy at ([^)\s]+)\)`)

// Args are the serve flags for o, as docker compose gives them: mutual TLS
// with Envoy's client certificate (its SAN "envoy") and no other.
func (o ReplicaOptions) Args() []string {
	args := []string{"serve", "--config", o.Config, "--edge", "off",
		"--grpc-listen", o.GRPC, "--listen", o.HTTP, "--admin-listen", o.Admin, "--envoy-listen", o.EnvoyListen,
		"--grpc-tls-cert", filepath.Join(o.Certs, "server.pem"), "--grpc-tls-key", filepath.Join(o.Certs, "server-key.pem"),
		"--grpc-client-ca", filepath.Join(o.Certs, "ca.pem"), "--grpc-client-san", "envoy"}
	if o.DB != "" {
		args = append(args, "--db", o.DB)
	}
	if o.Redis != "" {
		args = append(args, "--redis", o.Redis)
	}
	return append(args, o.Extra...)
}

// StartReplica starts one replica; Ready waits for it to serve.
func StartReplica(o ReplicaOptions) (*Replica, error) {
	name := o.Name
	if name == "" {
		name = "tollgate"
	}
	r := &Replica{name: name, up: make(chan [2]string, 1)}
	onLine := func(line string) {
		if m := readyLine.FindStringSubmatch(line); m != nil {
			select {
			case r.up <- [2]string{m[1], m[2]}:
			default:
			}
		}
	}
	if err := r.start(name, exec.Command(o.Binary, o.Args()...), o.Logs, onLine); err != nil {
		return nil, err
	}
	return r, nil
}

// Ready waits until the replica says it serves, or d passes.
func (r *Replica) Ready(ctx context.Context, d time.Duration) error {
	if r.GRPC != "" {
		return nil
	}
	select {
	case a := <-r.up:
		r.HTTP, r.GRPC = a[0], a[1]
		return nil
	case <-r.Exited():
		return fmt.Errorf("tollgate serve exited: %v", r.Err())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return fmt.Errorf("tollgate serve did not start within %v", d)
	}
}

// MakeCerts runs `tollgate certs --out dir` unless dir already holds the
// CA: certificates are made on the first run and kept.
func MakeCerts(ctx context.Context, binary, dir string, logs io.Writer) (made bool, err error) {
	if fileExists(filepath.Join(dir, "ca.pem")) {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "certs", "--out", dir)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Run(); err != nil {
		return false, fmt.Errorf("tollgate certs --out %s: %w", dir, err)
	}
	return true, nil
}
