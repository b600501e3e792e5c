package cli

import (
	"context"
	"flag"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tollgate/tollgate/cmd/tollgate/app"
	"github.com/tollgate/tollgate/ratelimit"
)

// runServe parses serve's flags and runs the server (package app) until
// ctx ends.
func runServe(ctx context.Context, args []string, e *env) error {
	o, err := parseServe(args, e.stderr)
	if err != nil {
		return err
	}
	o.Stdout, o.Stderr, o.RateLimitClock, o.HealthClock = e.stdout, e.stderr, e.hooks.RateLimitClock, e.hooks.HealthClock
	return app.Serve(ctx, o)
}

// parseServe turns serve's flags into the server's options.
func parseServe(args []string, stderr io.Writer) (app.Options, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o app.Options
	serveFlags(fs, &o)
	var sans stringList
	grpcFlags(fs, &o.GRPC, &sans)
	httpFlags(fs, &o.HTTP)
	logFormat := fs.String("log-format", app.LogJSON, "log format: json (one object a line, for log pipelines) or text")
	logLevel := fs.String("log-level", "info", "least severe level logged: debug, info, warn or error")
	if err := parseInterleaved(fs, args); err != nil {
		return o, err
	}
	o.GRPC.ClientSANs = sans.values
	if err := checkServe(o); err != nil {
		return o, err
	}
	if err := o.LogLevel.UnmarshalText([]byte(*logLevel)); err != nil {
		return o, usagef("serve: --log-level %q: want debug, info, warn or error", *logLevel)
	}
	switch o.LogFormat = strings.ToLower(*logFormat); o.LogFormat {
	case app.LogJSON, app.LogText:
	default:
		return o, usagef("serve: --log-format %q: want json or text", *logFormat)
	}
	return o, nil
}

// checkServe refuses flags that contradict each other.
func checkServe(o app.Options) error {
	if o.ConfigPath == "" {
		return usagef("serve: --config FILE is required")
	}
	if o.XFFTrustedHops < 0 {
		return usagef("serve: --xff-trusted-hops must not be negative")
	}
	switch o.Edge {
	case app.EdgeInProcess, app.EdgeGRPC:
	case app.EdgeOff:
		if o.GRPC.Addr == "" {
			return usagef("serve: --edge off needs --grpc-listen: without the built-in edge, only Envoy (through gRPC) can serve the API")
		}
	default:
		return usagef("serve: --edge %q: want in-process, grpc or off", o.Edge)
	}
	return nil
}

func serveFlags(fs *flag.FlagSet, o *app.Options) {
	fs.StringVar(&o.ConfigPath, "config", os.Getenv(EnvConfig), "configuration file (YAML); default $TOLLGATE_CONFIG")
	fs.StringVar(&o.DB, "db", defaultDB(), "database URL: sqlite:///abs/path.db, sqlite://rel/path.db or postgres://…; default $TOLLGATE_DB or sqlite://tollgate.db")
	fs.StringVar(&o.RedisURL, "redis", os.Getenv("TOLLGATE_REDIS"), "Redis URL for rate limits shared by replicas: redis://host:6379/0, a Sentinel set (redis+sentinel://host:26379/0?master_name=NAME&addr=host2:26379) or a Cluster (redis+cluster://host:6379?addr=host2:6379); empty: in-memory limiter")
	fs.DurationVar(&o.RedisTimeout, "redis-timeout", ratelimit.DefaultPrimaryTimeout, "how long a rate-limit check waits for Redis before answering from the in-memory limiter (and treating Redis as down until a probe succeeds)")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "address of the HTTP listener: the built-in edge (the OpenAI-compatible API under /v1/) and the dashboard (every other path)")
	fs.StringVar(&o.Edge, "edge", app.EdgeInProcess, "the built-in edge under /v1/ on --listen: in-process (it calls the ext_authz and ext_proc code directly), grpc (it calls them over a private gRPC connection, as Envoy would), or off (behind Envoy: the listener serves the dashboard only, and --grpc-listen is required)")
	fs.IntVar(&o.XFFTrustedHops, "xff-trusted-hops", 0, "proxies in front of the edge trusted to append to X-Forwarded-For: the built-in edge's, and Envoy's xff_num_trusted_hops in the listener served over xDS; the client address of IP restrictions and of the dashboard's sign-in limit is the entry that many from the right (with --edge off, Envoy is one more hop in front of the dashboard)")
	fs.StringVar(&o.EnvoyListen, "envoy-listen", "0.0.0.0:8080", "where the Envoys served over xDS (--grpc-listen) bind the public listener: IP:port")
	fs.DurationVar(&o.CacheTTL, "cache-ttl", 0, "how long a replica may serve a key or account from memory without hearing of a change (default 1s with SQLite; 30s with PostgreSQL, whose changes are announced at once)")
	fs.IntVar(&o.MaxInFlight, "max-in-flight", 2048, "the most requests this replica serves at once; past it a new request is refused at once with 503 and Retry-After, so that overload is shed instead of queued (0: no limit)")
	fs.DurationVar(&o.Drain, "drain-timeout", 30*time.Second, "how long shutdown waits for in-flight streams")
	fs.StringVar(&o.Journal, "journal", "", "file that keeps usage records the database could not take (replayed at the next start; records it refused for good go to FILE.dead); default beside the SQLite database, or tollgate-usage.journal in the working directory")
	fs.StringVar(&o.AdminListen, "admin-listen", "127.0.0.1:9464", "address of the admin listener: /metrics (Prometheus), /healthz, /readyz; empty: none")
}

func grpcFlags(fs *flag.FlagSet, g *app.GRPCListen, sans *stringList) {
	fs.StringVar(&g.Addr, "grpc-listen", "", "where the gRPC server (ext_authz, ext_proc, xDS) for Envoy listens: host:port (127.0.0.1:9001 beside a local Envoy), or unix:///path.sock; empty (the default): no gRPC server, the built-in edge alone serves the API. Plaintext TCP is allowed on a loopback address only; elsewhere give --grpc-tls-cert, --grpc-tls-key and --grpc-client-ca")
	fs.StringVar(&g.CertFile, "grpc-tls-cert", "", "the gRPC server's TLS certificate (PEM); reloaded when the file changes")
	fs.StringVar(&g.KeyFile, "grpc-tls-key", "", "the gRPC server's TLS private key (PEM)")
	fs.StringVar(&g.CAFile, "grpc-client-ca", "", "the CA whose client certificates may call the gRPC server (PEM); with TLS, a client without one is refused")
	fs.Var(sans, "grpc-client-san", "a name (DNS, URI such as spiffe://…, IP or email SAN) a client certificate must carry to call the gRPC server; repeat for several; none: any certificate --grpc-client-ca signed is accepted")
	fs.BoolVar(&g.MeshTLS, "grpc-mesh-mtls", false, "serve plaintext gRPC off loopback because a service mesh's sidecar enforces mutual TLS in front of Tollgate (Istio with a STRICT PeerAuthentication, Linkerd); never without one")
}

func httpFlags(fs *flag.FlagSet, l *app.HTTPLimits) {
	fs.DurationVar(&l.ReadHeader, "http-header-timeout", 10*time.Second, "how long a client may take to send a request's headers")
	fs.DurationVar(&l.ReadBody, "http-body-timeout", 60*time.Second, "how long a client may take to send a whole request (headers and body); a body that stops arriving is dropped. Answers, streamed or not, are not bounded by it")
	fs.DurationVar(&l.Idle, "http-idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept")
	fs.IntVar(&l.MaxHeaderBytes, "http-max-header-bytes", 64<<10, "the largest request header block accepted")
	fs.IntVar(&l.ConnsPerIP, "http-max-conns-per-ip", 256, "the most connections one client address may hold open at once (0: no limit)")
}
