package local

import (
	"context"
	"fmt"
	"io"
	"reflect"
)

// Run starts the topology, prints where the API, the dashboard and the
// admin listeners are, and keeps it up until ctx ends or a child exits by
// itself; then it stops the rest (Stop). It is what `make run-envoy` runs.
func Run(ctx context.Context, o Options, stdout io.Writer) error {
	t, err := Start(ctx, o)
	if err != nil {
		return err
	}
	t.Banner(stdout)
	exited := t.waitAnyExit(ctx)
	stopErr := t.Stop()
	if exited != "" {
		return fmt.Errorf("%s exited by itself; stopped the rest", exited)
	}
	return stopErr
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

// waitAnyExit waits for ctx to end ("") or a child to exit (its name).
func (t *Topology) waitAnyExit(ctx context.Context) string {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(t.Envoy.Exited())}}
	names := []string{"", "envoy"}
	for i, r := range t.Replicas {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(r.Exited())})
		names = append(names, fmt.Sprintf("tollgate %d", i+1))
	}
	chosen, _, _ := reflect.Select(cases)
	return names[chosen]
}
