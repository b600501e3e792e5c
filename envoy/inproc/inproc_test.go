package inproc

import (
	"context"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/envoy/contract"
)

// fakeSession answers each request with a response naming the message
// count, fails on a request with no body, and notes how it finished.
type fakeSession struct {
	step     string
	n        int
	mu       sync.Mutex
	finished []error
	ended    chan struct{}
}

func (f *fakeSession) Handle(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	if req.GetRequestBody() == nil {
		return nil, status.Error(codes.InvalidArgument, "want a body")
	}
	f.n++
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_RequestBody{RequestBody: &extprocv3.BodyResponse{}}}, nil
}

func (f *fakeSession) Finish(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = append(f.finished, err)
	close(f.ended)
}

type fixture struct {
	b        *Binding
	sessions chan *fakeSession
}

func newFixture() *fixture {
	f := &fixture{sessions: make(chan *fakeSession, 10)}
	f.b = New(nil, func(ctx context.Context, step string) (Session, error) {
		if step != contract.StepRouter && step != contract.StepUpstream {
			return nil, status.Errorf(codes.InvalidArgument, "unknown step %q", step)
		}
		s := &fakeSession{step: step, ended: make(chan struct{})}
		f.sessions <- s
		return s, nil
	})
	return f
}

func body() *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{RequestBody: &extprocv3.HttpBody{Body: []byte("x")}}}
}

func TestStepComesFromOutgoingMetadataAndAnswersFollowSends(t *testing.T) {
	f := newFixture()
	ctx := metadata.AppendToOutgoingContext(t.Context(), contract.HeaderStep, contract.StepUpstream)
	st, err := f.b.ExtProc().Process(ctx)
	require.NoError(t, err)
	s := <-f.sessions
	require.Equal(t, contract.StepUpstream, s.step)
	for range 3 {
		require.NoError(t, st.Send(body()))
		resp, err := st.Recv()
		require.NoError(t, err)
		require.NotNil(t, resp.GetRequestBody())
	}
	require.Equal(t, 3, s.n)
	require.Equal(t, 1, f.b.Open())
	require.NoError(t, st.CloseSend())
	<-s.ended
	require.Len(t, s.finished, 1)
	require.ErrorIs(t, s.finished[0], io.EOF, "a clean close reaches the server as the end of the stream")
	require.Zero(t, f.b.Open())
	require.NoError(t, f.b.Wait(t.Context()))
	_, err = st.Recv()
	require.ErrorIs(t, err, io.EOF)
	require.ErrorIs(t, st.Send(body()), io.EOF, "a closed stream takes no more messages")
}

func TestAnUnknownStepIsRefused(t *testing.T) {
	f := newFixture()
	ctx := metadata.AppendToOutgoingContext(t.Context(), contract.HeaderStep, "sideways")
	_, err := f.b.ExtProc().Process(ctx)
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Zero(t, f.b.Open())
}

func TestAServerErrorEndsTheStreamWithItsStatus(t *testing.T) {
	f := newFixture()
	st, err := f.b.ExtProc().Process(t.Context())
	require.NoError(t, err)
	s := <-f.sessions
	require.Equal(t, contract.StepRouter, s.step, "no metadata: the router step")
	// As over gRPC: Send reports io.EOF, Recv the status.
	require.ErrorIs(t, st.Send(&extprocv3.ProcessingRequest{}), io.EOF)
	_, err = st.Recv()
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	<-s.ended
	require.Equal(t, codes.InvalidArgument, status.Code(s.finished[0]))
	require.NoError(t, st.CloseSend())
	require.Len(t, s.finished, 1, "a session finishes once")
}

func TestTheClientGoingAwayFinishesTheSessionAsCanceledAtOnce(t *testing.T) {
	f := newFixture()
	ctx, cancel := context.WithCancel(t.Context())
	st, err := f.b.ExtProc().Process(ctx)
	require.NoError(t, err)
	s := <-f.sessions
	require.NoError(t, st.Send(body()))
	_, err = st.Recv()
	require.NoError(t, err)
	// Nobody calls the stream again: the session still learns at once,
	// as a gRPC server's Recv does.
	cancel()
	select {
	case <-s.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not finish when its context ended")
	}
	s.mu.Lock()
	require.Equal(t, codes.Canceled, status.Code(s.finished[0]))
	s.mu.Unlock()
	require.NoError(t, st.CloseSend())
	s.mu.Lock()
	require.Len(t, s.finished, 1)
	s.mu.Unlock()
	require.NoError(t, f.b.Wait(t.Context()))
}

func TestWaitWaitsForTheOpenSessions(t *testing.T) {
	f := newFixture()
	st, err := f.b.ExtProc().Process(t.Context())
	require.NoError(t, err)
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, f.b.Wait(short), context.DeadlineExceeded, "a session is open")
	waited := make(chan error, 1)
	go func() { waited <- f.b.Wait(t.Context()) }()
	require.NoError(t, st.CloseSend())
	require.NoError(t, <-waited)
}

type authzFunc func(context.Context, *authv3.CheckRequest) (*authv3.CheckResponse, error)

func (f authzFunc) Check(ctx context.Context, r *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	return f(ctx, r)
}

func TestCheckCallsTheServerAndConvertsItsErrors(t *testing.T) {
	want := &authv3.CheckResponse{}
	var got *authv3.CheckRequest
	b := New(authzFunc(func(_ context.Context, r *authv3.CheckRequest) (*authv3.CheckResponse, error) {
		got = r
		if r.GetAttributes() == nil {
			return nil, errors.New("boom")
		}
		return want, nil
	}), nil)
	req := &authv3.CheckRequest{Attributes: &authv3.AttributeContext{}}
	resp, err := b.Authz().Check(t.Context(), req)
	require.NoError(t, err)
	require.Same(t, want, resp)
	require.Same(t, req, got, "the message is handed over, not copied")
	_, err = b.Authz().Check(t.Context(), &authv3.CheckRequest{})
	require.Equal(t, codes.Unknown, status.Code(err), "a plain error becomes a status, as over gRPC")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = b.Authz().Check(ctx, req)
	require.Equal(t, codes.Canceled, status.Code(err))
}

func TestWaitWaitsAgainForSessionsOpenedAfterTheLastWait(t *testing.T) {
	f := newFixture()
	first, err := f.b.ExtProc().Process(t.Context())
	require.NoError(t, err)
	waited := make(chan error, 1)
	go func() { waited <- f.b.Wait(t.Context()) }()
	require.Eventually(t, func() bool { f.b.open.mu.Lock(); defer f.b.open.mu.Unlock(); return f.b.open.idle != nil },
		5*time.Second, time.Millisecond, "the Wait is waiting")
	require.NoError(t, first.CloseSend())
	require.NoError(t, <-waited)

	second, err := f.b.ExtProc().Process(t.Context())
	require.NoError(t, err)
	short, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, f.b.Wait(short), context.DeadlineExceeded, "the second session is open: the first one's idle does not count")
	require.NoError(t, second.CloseSend())
	require.NoError(t, f.b.Wait(t.Context()))
}
