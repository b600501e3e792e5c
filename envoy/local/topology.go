package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// Options describe a topology: Replicas Tollgates behind one Envoy.
type Options struct {
	Repo     string // the repository root: envoy/envoy.yaml is read from it
	Tollgate string // the tollgate executable
	Envoy    string // the envoy executable
	Config   string // the configuration file every replica reads
	DB       string // the database every replica shares; empty: serve's default (SQLite)
	Redis    string // the Redis every replica shares; empty: each its own in-memory limiter
	Certs    string // where the certificates are (made when missing)
	Dir      string // where the substituted bootstrap is written
	// Replicas is how many Tollgates; default 1. With more than one they
	// need a shared DB (PostgreSQL) and Redis.
	Replicas int
	// Listen is Envoy's public listener, host:port (port 0: any).
	Listen string
	// EnvoyAdmin is Envoy's admin listener; GRPCPort, HTTPPort and
	// AdminPort are replica i's ports, each plus i (0: any).
	EnvoyAdmin                    string
	GRPCPort, HTTPPort, AdminPort int
	Extra                         []string // more serve flags for every replica
	EnvoyLogLevel                 string
	Quick                         bool // stop Envoy within seconds (tests)
	// EditBootstrap, when set, changes the substituted bootstrap before
	// Envoy starts (tests that run Envoy in a configuration of their own).
	EditBootstrap func([]byte) ([]byte, error)
	Logs          io.Writer
}

// Topology is a running set of replicas behind one Envoy.
type Topology struct {
	Envoy    *Envoy
	Replicas []*Replica
	stopOnce sync.Once
}

// Start brings the topology up: certificates (first run), the replicas,
// then Envoy, and waits until Envoy's public listener answers. On error,
// what was started is stopped.
func Start(ctx context.Context, o Options) (*Topology, error) {
	if o.Replicas < 1 {
		o.Replicas = 1
	}
	if _, err := MakeCerts(ctx, o.Tollgate, o.Certs, o.Logs); err != nil {
		return nil, err
	}
	certs, err := filepath.Abs(o.Certs)
	if err != nil {
		return nil, err
	}
	t := &Topology{}
	if err := t.startReplicas(ctx, o, certs); err != nil {
		t.Stop()
		return nil, err
	}
	if err := t.startEnvoy(ctx, o, certs); err != nil {
		t.Stop()
		return nil, err
	}
	return t, nil
}

func (t *Topology) startReplicas(ctx context.Context, o Options, certs string) error {
	for i := range o.Replicas {
		name := "tollgate"
		if o.Replicas > 1 {
			name += strconv.Itoa(i + 1)
		}
		r, err := StartReplica(ReplicaOptions{
			Binary: o.Tollgate, Name: name, Config: o.Config, DB: o.DB, Redis: o.Redis,
			GRPC: hostPort(o.GRPCPort, i), HTTP: hostPort(o.HTTPPort, i), Admin: hostPort(o.AdminPort, i),
			EnvoyListen: o.Listen, Certs: certs, Extra: o.Extra, Logs: o.Logs,
		})
		if err != nil {
			return err
		}
		t.Replicas = append(t.Replicas, r)
		// One at a time: the first creates the database's tables.
		if err := r.Ready(ctx, 60*time.Second); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

func (t *Topology) startEnvoy(ctx context.Context, o Options, certs string) error {
	src, err := os.ReadFile(filepath.Join(o.Repo, "envoy", "envoy.yaml"))
	if err != nil {
		return err
	}
	a := Addrs{Admin: o.EnvoyAdmin, Certs: certs}
	for _, r := range t.Replicas {
		a.GRPC, a.HTTP = append(a.GRPC, r.GRPC), append(a.HTTP, r.HTTP)
	}
	boot, err := Bootstrap(src, a)
	if err != nil {
		return err
	}
	if o.EditBootstrap != nil {
		if boot, err = o.EditBootstrap(boot); err != nil {
			return err
		}
	}
	t.Envoy, err = StartEnvoy(EnvoyOptions{Binary: o.Envoy, Bootstrap: boot, Dir: o.Dir, LogLevel: o.EnvoyLogLevel, Logs: o.Logs, Quick: o.Quick})
	if err != nil {
		return err
	}
	return t.Envoy.Ready(ctx, 30*time.Second)
}

// hostPort is 127.0.0.1 with port base+i (0 when base is 0: any).
func hostPort(base, i int) string {
	if base == 0 {
		return "127.0.0.1:0"
	}
	return "127.0.0.1:" + strconv.Itoa(base+i)
}

// Stop stops the replicas first, each draining its streams (SIGTERM;
// SIGKILL after 45 s), then Envoy (SIGTERM; SIGKILL after 10 s). It
// reports a child that had to be killed.
func (t *Topology) Stop() error {
	var errs []error
	t.stopOnce.Do(func() {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i, r := range t.Replicas {
			wg.Go(func() {
				if !r.Stop(45 * time.Second) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("replica %d did not stop on SIGTERM: killed", i+1))
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if t.Envoy != nil && !t.Envoy.Stop(10*time.Second) {
			errs = append(errs, errors.New("envoy did not stop on SIGTERM: killed"))
		}
	})
	return errors.Join(errs...)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
