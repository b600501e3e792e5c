package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
)

// GRPCListen says where the gRPC server for Envoy listens and how callers
// prove who they are (the --grpc-* flags).
type GRPCListen struct {
	Addr     string // unix:///path.sock or host:port; empty: no gRPC server
	CertFile string
	KeyFile  string
	CAFile   string
	// ClientSANs, when any, are the only client certificate names (DNS,
	// URI, IP or email SANs) the server accepts; none: any certificate
	// the CA signed.
	ClientSANs []string
	// MeshTLS acknowledges plaintext off loopback: a service mesh's sidecar
	// terminates mutual TLS in front of Tollgate.
	MeshTLS bool
}

// errPlaintextOffLoopback refuses an unauthenticated gRPC port that others
// could reach: it serves provider credentials to whoever calls it.
var errPlaintextOffLoopback = errors.New("--grpc-listen: plaintext gRPC is allowed only on a loopback address or a unix socket; give --grpc-tls-cert, --grpc-tls-key and --grpc-client-ca to serve it with mutual TLS (tollgate certs makes a local CA and the certificates)")

// listen opens the listener and, for TLS, the server credentials.
func (g *GRPCListen) listen(log *slog.Logger) (net.Listener, []grpc.ServerOption, error) {
	anyTLS := g.CertFile != "" || g.KeyFile != "" || g.CAFile != ""
	if anyTLS && (g.CertFile == "" || g.KeyFile == "" || g.CAFile == "") {
		return nil, nil, errors.New("--grpc-tls-cert, --grpc-tls-key and --grpc-client-ca go together: give all three")
	}
	if len(g.ClientSANs) > 0 && !anyTLS {
		return nil, nil, errors.New("--grpc-client-san needs mutual TLS: give --grpc-tls-cert, --grpc-tls-key and --grpc-client-ca (behind a mesh's sidecar, its own authorization policy names the allowed callers)")
	}
	if path, ok := strings.CutPrefix(g.Addr, "unix://"); ok {
		if path == "" {
			return nil, nil, fmt.Errorf("--grpc-listen %q: no socket path", g.Addr)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("--grpc-listen: remove a stale socket: %w", err)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, nil, fmt.Errorf("--grpc-listen: %w", err)
		}
		if err := os.Chmod(path, 0o660); err != nil {
			l.Close()
			return nil, nil, fmt.Errorf("--grpc-listen: %w", err)
		}
		return l, g.tlsOptions(log, anyTLS), nil
	}
	host, _, err := net.SplitHostPort(g.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--grpc-listen %q: want host:port or unix:///path.sock", g.Addr)
	}
	if !anyTLS && !g.MeshTLS && !isLoopback(host) {
		return nil, nil, errPlaintextOffLoopback
	}
	l, err := net.Listen("tcp", g.Addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--grpc-listen: %w", err)
	}
	return l, g.tlsOptions(log, anyTLS), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (g *GRPCListen) tlsOptions(log *slog.Logger, on bool) []grpc.ServerOption {
	if !on {
		return nil
	}
	r := &certReloader{certFile: g.CertFile, keyFile: g.KeyFile, caFile: g.CAFile, sans: g.ClientSANs, log: log}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(&tls.Config{
		MinVersion:         tls.VersionTLS12,
		GetConfigForClient: r.config,
	}))}
}

// load checks the certificate files once, so a bad file stops the start.
func (g *GRPCListen) load() error {
	if g.CertFile == "" {
		return nil
	}
	r := &certReloader{certFile: g.CertFile, keyFile: g.KeyFile, caFile: g.CAFile}
	_, err := r.build()
	return err
}

// certReloader serves the TLS configuration from the files, rebuilt when
// one of them changes (checked at most once a second), so certificates are
// rotated without a restart. A file that stops parsing keeps the last good
// configuration, and says so in the log.
type certReloader struct {
	certFile, keyFile, caFile string
	sans                      []string // allowed client names; none: any
	log                       *slog.Logger

	mu      sync.Mutex
	cfg     *tls.Config
	stamp   string
	checked time.Time
}

func (r *certReloader) config(*tls.ClientHelloInfo) (*tls.Config, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cfg != nil && time.Since(r.checked) < time.Second {
		return r.cfg, nil
	}
	r.checked = time.Now()
	stamp := r.fileStamp()
	if r.cfg != nil && stamp == r.stamp {
		return r.cfg, nil
	}
	cfg, err := r.build()
	if err != nil {
		if r.cfg == nil {
			return nil, err
		}
		if r.log != nil {
			r.log.Error("gRPC TLS files changed but do not load; keeping the certificates in use", "err", err)
		}
		r.stamp = stamp // do not retry every handshake
		return r.cfg, nil
	}
	if r.cfg != nil && r.log != nil {
		r.log.Info("gRPC TLS certificates reloaded")
	}
	r.cfg, r.stamp = cfg, stamp
	return cfg, nil
}

func (r *certReloader) fileStamp() string {
	var b strings.Builder
	for _, f := range []string{r.certFile, r.keyFile, r.caFile} {
		if st, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s:%d:%d;", f, st.Size(), st.ModTime().UnixNano())
		}
	}
	return b.String()
}

func (r *certReloader) build() (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return nil, fmt.Errorf("--grpc-tls-cert/--grpc-tls-key: %w", err)
	}
	caPEM, err := os.ReadFile(r.caFile)
	if err != nil {
		return nil, fmt.Errorf("--grpc-client-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("--grpc-client-ca %s: no PEM certificate in it", r.caFile)
	}
	return &tls.Config{
		MinVersion:       tls.VersionTLS12,
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        pool,
		NextProtos:       []string{"h2"},
		VerifyConnection: r.verifyClient,
	}, nil
}

// errClientName refuses a client certificate the CA signed for a name not
// in --grpc-client-san.
var errClientName = errors.New("client certificate names none of --grpc-client-san")

// verifyClient runs after the chain is verified: with --grpc-client-san,
// the client's certificate must name one of them, or the handshake fails.
func (r *certReloader) verifyClient(cs tls.ConnectionState) error {
	if len(r.sans) == 0 {
		return nil
	}
	if len(cs.PeerCertificates) > 0 && certNames(cs.PeerCertificates[0], r.sans) {
		return nil
	}
	if r.log != nil && len(cs.PeerCertificates) > 0 {
		c := cs.PeerCertificates[0]
		r.log.Warn("gRPC client certificate refused: it names none of --grpc-client-san",
			"subject", c.Subject.CommonName, "dns", c.DNSNames, "uris", fmt.Sprint(c.URIs), "ips", fmt.Sprint(c.IPAddresses))
	}
	return errClientName
}

// certNames reports whether c carries one of the names as a DNS (any
// case), URI, IP or email SAN. The subject's common name does not count.
func certNames(c *x509.Certificate, names []string) bool {
	for _, want := range names {
		for _, d := range c.DNSNames {
			if strings.EqualFold(d, want) {
				return true
			}
		}
		for _, u := range c.URIs {
			if u.String() == want {
				return true
			}
		}
		if ip := net.ParseIP(want); ip != nil {
			for _, got := range c.IPAddresses {
				if got.Equal(ip) {
					return true
				}
			}
		}
		if slices.Contains(c.EmailAddresses, want) {
			return true
		}
	}
	return false
}

// inProcess is a private listener for the built-in edge: it reaches the
// same gRPC server as Envoy does, without a socket anyone else can open.
type inProcess struct {
	lis *bufconn.Listener
}

func newInProcess() *inProcess { return &inProcess{lis: bufconn.Listen(1 << 20)} }

// dial connects a client to the in-process listener.
func (p *inProcess) dial(opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///tollgate-in-process", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return p.lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
	}, opts...)...)
}
