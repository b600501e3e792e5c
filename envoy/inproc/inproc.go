// Package inproc binds the built-in edge to Tollgate's ext_authz and
// ext_proc servers in the same process: the edge keeps calling the gRPC
// client interfaces Envoy's protocol defines, and this package answers
// them by calling the very server code that serves Envoy — without a
// socket, without protobuf encoding, without a goroutine per stream.
//
// The semantics are gRPC's, as the edge and the servers rely on them:
//   - Check is a plain call.
//   - A Process stream runs its step's session synchronously: Send hands
//     the message to the session and keeps its answer for the next Recv;
//     an error from the session ends the stream with that status.
//   - CloseSend ends the session as a clean end of stream (io.EOF to the
//     server); the stream's context ending first ends it as Canceled, as a
//     client going away does over gRPC — at once, even while nobody calls
//     the stream.
//   - The outgoing metadata x-tollgate-step chooses the step.
package inproc

import (
	"context"
	"errors"
	"io"
	"sync"

	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/guard"
)

// Session is one ext_proc stream's state on the server side (an
// extproc.Session: the wiring of serve binds the two, so that this package,
// below the servers, imports neither).
type Session interface {
	Handle(req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error)
	Finish(err error)
}

// Opener starts a session of a step (extproc.Server's Open, adapted by
// the wiring of serve).
type Opener func(ctx context.Context, step string) (Session, error)

// Binding is the in-process connection to one ext_authz and one ext_proc
// server.
type Binding struct {
	authz  authv3.AuthorizationServer
	opener Opener
	// open counts the sessions not yet finished, for Wait.
	open sessions
}

// sessions counts open sessions; idle, made by a Wait that finds some
// open (not by every session that opens when none is), is closed when the
// count falls to 0.
type sessions struct {
	mu   sync.Mutex
	n    int
	idle chan struct{}
}

func (c *sessions) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}

func (c *sessions) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 && c.idle != nil {
		close(c.idle)
		c.idle = nil
	}
}

// Open is the number of sessions not yet finished.
func (b *Binding) Open() int {
	b.open.mu.Lock()
	defer b.open.mu.Unlock()
	return b.open.n
}

// New binds an ext_authz server and the ext_proc sessions open makes.
func New(authz authv3.AuthorizationServer, open Opener) *Binding {
	return &Binding{authz: authz, opener: open}
}

// Authz is the ext_authz client.
func (b *Binding) Authz() authv3.AuthorizationClient { return authzClient{b.authz} }

// ExtProc is the ext_proc client.
func (b *Binding) ExtProc() extprocv3.ExternalProcessorClient { return procClient{b} }

// Wait returns when every session has finished (so has written its usage
// record), or when ctx ends; it is for shutdown, after the edge has
// stopped taking requests — gRPC's GracefulStop with WaitForHandlers.
func (b *Binding) Wait(ctx context.Context) error {
	b.open.mu.Lock()
	if b.open.n == 0 {
		b.open.mu.Unlock()
		return nil
	}
	if b.open.idle == nil {
		b.open.idle = make(chan struct{})
	}
	idle := b.open.idle
	b.open.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type authzClient struct{ s authv3.AuthorizationServer }

// Check calls the server. A panic in it is recovered (guard) and fails the
// call with codes.Internal, as the gRPC binding's interceptor does: the
// edge then fails closed with 500 internal_error.
func (c authzClient) Check(ctx context.Context, req *authv3.CheckRequest, _ ...grpc.CallOption) (resp *authv3.CheckResponse, err error) {
	if err := ctx.Err(); err != nil {
		return nil, contextStatus(err)
	}
	defer guard.Recover(WhereAuthz, nil, func(*guard.Panic) string {
		resp, err = nil, errInternal
		return req.GetAttributes().GetRequest().GetHttp().GetHeaders()[contract.HeaderRequestID]
	})
	resp, err = c.s.Check(ctx, req)
	if err != nil {
		return nil, status.Convert(err).Err()
	}
	return resp, nil
}

type procClient struct{ b *Binding }

func (c procClient) Process(ctx context.Context, _ ...grpc.CallOption) (extprocv3.ExternalProcessor_ProcessClient, error) {
	if err := ctx.Err(); err != nil {
		return nil, contextStatus(err)
	}
	step := contract.StepRouter
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		if v := md.Get(contract.HeaderStep); len(v) > 0 {
			step = v[len(v)-1]
		}
	}
	return c.ProcessStep(ctx, step)
}

// ProcessStep opens a stream of the step named, as Process does with the
// step in the outgoing metadata; the built-in edge calls it directly and
// spares the metadata.
func (c procClient) ProcessStep(ctx context.Context, step string) (extprocv3.ExternalProcessor_ProcessClient, error) {
	if err := ctx.Err(); err != nil {
		return nil, contextStatus(err)
	}
	x, err := c.b.opener(ctx, step)
	if err != nil {
		return nil, err
	}
	c.b.open.add()
	s := &stream{ctx: ctx, x: x, b: c.b}
	s.stopWatch = context.AfterFunc(ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.end(contextStatus(ctx.Err()))
	})
	return s, nil
}

// stream is one in-process ext_proc stream.
type stream struct {
	grpc.ClientStream // never called: every method the edge uses is below

	ctx       context.Context
	x         Session
	b         *Binding
	stopWatch func() bool

	mu      sync.Mutex
	pending *extprocv3.ProcessingResponse // the answer to the last Send
	// err is the stream's end: nil while it runs, io.EOF after a clean
	// close, else its status.
	err error
}

// end finishes the session once, with err as the server sees it.
func (s *stream) end(err error) {
	if s.err != nil {
		return
	}
	s.err = err
	defer s.b.open.done()
	defer guard.Recover(WhereExtProc, nil, nil)
	s.x.Finish(err)
}

// handle runs the session on one message. A panic the session did not
// recover itself (an extproc.Session does) is recovered here and ends the
// stream with codes.Internal, as a failed gRPC stream ends: the edge then
// answers 500 internal_error.
func (s *stream) handle(req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, err error) {
	defer guard.Recover(WhereExtProc, nil, func(*guard.Panic) string {
		resp, err = nil, errInternal
		return ""
	})
	return s.x.Handle(req)
}

// Where the in-process binding's recovered panics are counted
// (tollgate_panics_total).
const (
	WhereAuthz   = "inproc_authz"
	WhereExtProc = "inproc_extproc"
)

var errInternal = status.Error(codes.Internal, "internal error")

// contextStatus is the status of a call whose context ended with err, as
// gRPC's (status.FromContextError); a context's own two ends share theirs,
// as every stream of a finished request ends with one of them.
func contextStatus(err error) error {
	switch err {
	case context.Canceled:
		return errCanceled
	case context.DeadlineExceeded:
		return errDeadline
	}
	return status.FromContextError(err).Err()
}

var (
	errCanceled = status.FromContextError(context.Canceled).Err()
	errDeadline = status.FromContextError(context.DeadlineExceeded).Err()
)

func (s *stream) Send(req *extprocv3.ProcessingRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return io.EOF // as gRPC: the stream's status comes from Recv
	}
	resp, err := s.handle(req)
	if err != nil {
		s.end(status.Convert(err).Err())
		return io.EOF
	}
	s.pending = resp
	return nil
}

func (s *stream) Recv() (*extprocv3.ProcessingResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.pending; r != nil {
		s.pending = nil
		return r, nil
	}
	if s.err != nil {
		if errors.Is(s.err, io.EOF) {
			return nil, io.EOF
		}
		return nil, s.err
	}
	// Over gRPC this Recv would wait for an answer the server never sends;
	// the edge always sends before it receives, so this is a bug, not a wait.
	return nil, status.Error(codes.Internal, "inproc: Recv without a pending answer")
}

func (s *stream) CloseSend() error {
	s.stopWatch()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		s.end(contextStatus(s.ctx.Err()))
	} else {
		s.end(io.EOF)
	}
	return nil
}

func (s *stream) Context() context.Context { return s.ctx }

func (s *stream) Header() (metadata.MD, error) { return nil, nil }

func (s *stream) Trailer() metadata.MD { return nil }

func (s *stream) SendMsg(m any) error {
	req, ok := m.(*extprocv3.ProcessingRequest)
	if !ok {
		return status.Errorf(codes.Internal, "inproc: SendMsg of %T", m)
	}
	return s.Send(req)
}

func (s *stream) RecvMsg(m any) error {
	out, ok := m.(*extprocv3.ProcessingResponse)
	if !ok {
		return status.Errorf(codes.Internal, "inproc: RecvMsg into %T", m)
	}
	r, err := s.Recv()
	if err != nil {
		return err
	}
	proto.Reset(out)
	proto.Merge(out, r)
	return nil
}
