package local

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"time"
)

// Restart back-off: a child that exits by itself is started again after
// restartFirst, doubling up to restartMost while it keeps dying; one that
// stayed up restartSettled starts again at restartFirst.
const (
	restartFirst   = time.Second
	restartMost    = 30 * time.Second
	restartSettled = time.Minute
)

// Run starts the topology, prints where the API, the dashboard and the
// admin listeners are, and keeps it up until ctx ends: a child that exits
// by itself (Envoy or a replica: a crash, an OOM kill) is said so and
// started again with back-off, on the same addresses. Then it stops the
// rest (Stop). It is what `make run-envoy` runs.
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	t, err := Start(ctx, o)
	if err != nil {
		return err
	}
	t.Banner(stdout)
	backoff := map[string]time.Duration{}
	started := map[string]time.Time{}
	for {
		name, i := t.waitAnyExit(ctx)
		if name == "" {
			return t.Stop()
		}
		wait := backoff[name]
		if wait == 0 || time.Since(started[name]) > restartSettled {
			wait = restartFirst
		}
		fmt.Fprintf(stdout, "run-envoy: %s exited by itself (%v); starting it again in %v\n", name, t.exitErr(i), wait)
		select {
		case <-ctx.Done():
			return t.Stop()
		case <-time.After(wait):
		}
		backoff[name], started[name] = min(wait*2, restartMost), time.Now()
		if err := t.restart(ctx, o, i); err != nil {
			fmt.Fprintf(stdout, "run-envoy: %s did not start again: %v\n", name, err)
			continue // waitAnyExit sees it exited, and it is tried again
		}
		fmt.Fprintf(stdout, "run-envoy: %s is up again\n", name)
	}
}

// exitErr is how child i (0: Envoy, 1…: replica i) ended.
func (t *Topology) exitErr(i int) error {
	if i == 0 {
		return t.Envoy.Err()
	}
	return t.Replicas[i-1].Err()
}

// restart starts child i again (0: Envoy, 1…: replica i) on the addresses
// it had.
func (t *Topology) restart(ctx context.Context, o Options, i int) error {
	certs, err := filepath.Abs(o.Certs)
	if err != nil {
		return err
	}
	if i == 0 {
		return t.startEnvoy(ctx, o, certs)
	}
	old := t.Replicas[i-1]
	r, err := StartReplica(ReplicaOptions{
		Binary: o.Tollgate, Name: old.name, Config: o.Config, DB: o.DB, Redis: o.Redis,
		GRPC: old.GRPC, HTTP: old.HTTP, Admin: hostPort(o.AdminPort, i-1),
		EnvoyListen: o.Listen, Certs: certs, Extra: o.Extra, Logs: o.Logs,
	})
	if err != nil {
		return err
	}
	t.Replicas[i-1] = r
	return r.Ready(ctx, 60*time.Second)
}

// Banner prints where everything listens.
func (t *Topology) Banner(w io.Writer) {
	fmt.Fprintf(w, "run-envoy: OpenAI-compatible API at %s/v1 (Envoy), dashboard at %s/keys\n", t.Envoy.Listener, t.Envoy.Listener)
	fmt.Fprintf(w, "run-envoy: Envoy admin at %s\n", t.Envoy.Admin)
	for i, r := range t.Replicas {
		fmt.Fprintf(w, "run-envoy: tollgate %d: gRPC (mutual TLS) at %s, dashboard at http://%s/keys\n", i+1, r.GRPC, r.HTTP)
	}
	fmt.Fprintln(w, "run-envoy: Ctrl-C stops Tollgate (it drains its streams), then Envoy")
}

// waitAnyExit waits for ctx to end ("", -1) or a child to exit: its name
// and index (0: Envoy, 1…: replica i).
func (t *Topology) waitAnyExit(ctx context.Context) (string, int) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.Envoy.Exited())}}
	names := []string{"", "envoy"}
	for i, r := range t.Replicas {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.Exited())})
		names = append(names, fmt.Sprintf("tollgate %d", i+1))
	}
	chosen, _, _ := reflect.Select(cases)
	return names[chosen], chosen - 1
}
