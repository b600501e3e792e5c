// Command run-envoy runs Tollgate's production topology on one machine
// without containers (`make run-envoy`): `tollgate serve --edge off` with
// mutual TLS on its gRPC port, behind Envoy started from envoy/envoy.yaml,
// the bootstrap docker compose mounts. The work is done by package
// envoy/local.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/tollgate/tollgate/envoy/local"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "run-envoy: %v\n", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run-envoy", flag.ContinueOnError)
	o := local.Options{Repo: ".", EnvoyAdmin: "127.0.0.1:9901", GRPCPort: 9001, HTTPPort: 8081, AdminPort: 9464, Logs: os.Stderr}
	fs.StringVar(&o.Tollgate, "tollgate", "bin/tollgate", "the tollgate binary (make build)")
	fs.StringVar(&o.Envoy, "envoy", "", "the envoy binary; default $TOLLGATE_ENVOY, else the one make envoy installed (.venv/envoy-path)")
	fs.StringVar(&o.Config, "config", "examples/config.yaml", "the configuration file (reloaded when it changes)")
	fs.StringVar(&o.DB, "db", "", "database URL shared by the replicas (postgres://…); default tollgate serve's (sqlite://tollgate.db)")
	fs.StringVar(&o.Redis, "redis", "", "Redis URL for rate limits shared by the replicas (redis://127.0.0.1:6379/0); default the in-memory limiter")
	fs.StringVar(&o.Certs, "certs", "certs", "the mutual-TLS certificates (made by tollgate certs when missing)")
	fs.StringVar(&o.Listen, "listen", "127.0.0.1:8080", "Envoy's public listener: the API and the dashboard")
	fs.IntVar(&o.Replicas, "replicas", 1, "how many Tollgate replicas behind Envoy (more than one needs --db postgres://… and --redis)")
	fs.StringVar(&o.EnvoyLogLevel, "envoy-log-level", "info", "Envoy's --log-level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Replicas > 1 && (o.DB == "" || o.Redis == "") {
		return fmt.Errorf("--replicas %d: the replicas must share a database and a Redis (--db postgres://… --redis redis://…)", o.Replicas)
	}
	if o.Envoy == "" {
		p, err := local.EnvoyPath(o.Repo)
		if err != nil {
			return err
		}
		o.Envoy = p
	}
	dir, err := os.MkdirTemp("", "tollgate-run-envoy-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.Dir = dir
	return local.Run(ctx, o, os.Stdout)
}
