package inproc

import (
	"context"
	"io"
	"testing"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/guard"
)

type panickyAuthz struct {
	authv3.UnimplementedAuthorizationServer
}

func (panickyAuthz) Check(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	panic("check")
}

// panickySession panics in Handle and in Finish.
type panickySession struct{ finished chan struct{} }

func (panickySession) Handle(*extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	panic("handle")
}

func (s panickySession) Finish(error) {
	close(s.finished)
	panic("finish")
}

// TestPanicsEndTheCallNotTheProcess: a panic in the ext_authz server or in
// an ext_proc session fails that call with codes.Internal (the edge then
// answers 500), is counted, and the binding goes on serving.
func TestPanicsEndTheCallNotTheProcess(t *testing.T) {
	sess := panickySession{finished: make(chan struct{})}
	b := New(panickyAuthz{}, func(context.Context, string) (Session, error) { return sess, nil })
	authzBefore, procBefore := guard.CountOf(WhereAuthz), guard.CountOf(WhereExtProc)

	_, err := b.Authz().Check(context.Background(), &authv3.CheckRequest{})
	assert.Equal(t, codes.Internal, status.Code(err))
	assert.Equal(t, authzBefore+1, guard.CountOf(WhereAuthz))

	stream, err := b.ExtProc().(interface {
		ProcessStep(context.Context, string) (extprocv3.ExternalProcessor_ProcessClient, error)
	}).ProcessStep(context.Background(), contract.StepRouter)
	require.NoError(t, err)
	require.Equal(t, io.EOF, stream.Send(&extprocv3.ProcessingRequest{}), "the stream ends")
	_, err = stream.Recv()
	assert.Equal(t, codes.Internal, status.Code(err))
	<-sess.finished
	assert.Equal(t, procBefore+2, guard.CountOf(WhereExtProc), "Handle's panic and Finish's")
	require.NoError(t, b.Wait(context.Background()), "the session is counted as ended")
}
