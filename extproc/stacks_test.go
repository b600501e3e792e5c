package extproc

import (
	"context"
	"net"
	"testing"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/internal/testenv"
)

// TestAStreamWaitingForItsNextMessageHoldsASmallStack: a slow stream's
// ext_proc streams (two, or the router step's alone on the direct route)
// wait, each in its own goroutine, for as long as the provider takes. A goroutine keeps the stack its deepest work grew it
// to, and waiting inside gRPC's receive it uses too much of a 16 KiB
// stack for the collector to halve it; so neither step's work (the
// router step's admission, the upstream step's first chunk) may grow it
// past 8 KiB.
func TestAStreamWaitingForItsNextMessageHoldsASmallStack(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector deepens every frame")
	}
	g := newRig(t)
	_, routed := g.admitted(contract.PathChatCompletions, streamBody)
	steps := []struct {
		step string
		msgs []*extprocv3.ProcessingRequest
	}{
		{contract.StepRouter, []*extprocv3.ProcessingRequest{requestHeaders(contract.PathChatCompletions, "POST", false), requestBody(streamBody)}},
		{contract.StepUpstream, []*extprocv3.ProcessingRequest{upstreamHeaders(routed, gpt, 1), requestBody(streamBody),
			responseHeaders(":status", "200", "content-type", "text/event-stream"), bodyMsg(chunkHello, false)}},
		// The direct route: the router step's admission, then the
		// attempt's work, in one goroutine (each phase's work runs from
		// the step's own frame, not under the one before).
		{contract.StepRouterDirect, []*extprocv3.ProcessingRequest{requestHeaders(contract.PathChatCompletions, "POST", false), requestBody(streamBody),
			directHeaders(contract.ViaUpstream, ":status", "200", "content-type", "text/event-stream"), bodyMsg(chunkHello, false)}},
	}
	const streams = 200
	for _, s := range steps {
		t.Run(s.step, func(t *testing.T) {
			// A server of its own, stopped when the subtest ends once
			// every handler has returned: the next one counts none of
			// these goroutines.
			srv := grpc.NewServer(grpc.WaitForHandlers(true), grpc.ChainStreamInterceptor(guard.StreamServerInterceptor("test", nil)))
			defer srv.Stop()
			extprocv3.RegisterExternalProcessorServer(srv, g.srv)
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			go func() { _ = srv.Serve(lis) }()
			conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			require.NoError(t, err)
			defer conn.Close()
			client := extprocv3.NewExternalProcessorClient(conn)
			ctx := metadata.AppendToOutgoingContext(context.Background(), contract.HeaderStep, s.step)
			before := testenv.StacksInUse()
			for range streams {
				st, err := client.Process(ctx)
				require.NoError(t, err)
				for _, m := range s.msgs {
					require.NoError(t, st.Send(m))
					_, err := st.Recv()
					require.NoError(t, err)
				}
			}
			per := float64(testenv.StacksInUse()-before) / streams / 1024
			t.Logf("stacks per waiting stream: %.1f KiB", per)
			// 8 KiB for the server's goroutine, and the client's share;
			// a 16 KiB goroutine would read 18.
			assert.Less(t, per, 12.0)
		})
	}
}
