// Package extproc is Tollgate's Envoy ext_proc server. It runs in two steps
// on every request: the router step (an HCM filter, router.go) picks the
// path's endpoint (endpoint.go), validates the body, checks model access,
// holds the request's cost and picks the model's cluster; the upstream step
// (a cluster filter, run again on every attempt Envoy makes, upstream.go)
// rewrites the body and credentials for the deployment Envoy picked, then
// translates and meters the provider's answer, streamed or not. Both write
// a request's one usage record with record.go; the Recorder writes the
// records to the store in batches.
package extproc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tollgate/tollgate/authz/decision"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

// Keys is what ext_proc needs of storage (a store.Cache in production).
type Keys interface {
	KeyByID(ctx context.Context, id string) (store.Key, error)
	Account(ctx context.Context, id string) (store.Account, error)
}

// Balance holds money for a request until its usage record settles it.
type Balance interface {
	// Hold sets amount aside for the request; it fails with
	// store.ErrInsufficientBalance when the account cannot cover it. It
	// returns the lease the hold came from (a balance.Leaser's), which the
	// request's usage record names with the amount, or "" when the hold is
	// a reservation of the request's own (named after the request id),
	// which writing the record releases.
	Hold(ctx context.Context, accountID, requestID string, amount money.Nanos) (leaseID string, err error)
	// Done tells the Balance that the request has ended in this replica
	// (its router step is over; its record is made, here or elsewhere).
	Done(accountID, leaseID string, amount money.Nanos)
	// Cancel gives back a hold of a request refused before anything was
	// sent, which no usage record will settle.
	Cancel(accountID, requestID, leaseID string, amount money.Nanos)
	// Overdrawn tells the Balance that a request of the account was
	// charged more than it held: no further hold may be served without
	// asking the database, which refuses it while the balance cannot
	// cover it.
	Overdrawn(accountID string)
}

// Reservations is a Balance that reserves each request's hold in the
// database, one transaction per request (the Balance of tests, and of
// tools that run no Leaser).
type Reservations struct {
	Store interface {
		Reserve(ctx context.Context, accountID, reservationID string, amount money.Nanos, expiresAt time.Time) error
		Release(ctx context.Context, reservationID string) error
	}
	// HoldFor is how long a hold lives if no usage record settles it (a
	// replica that died); default one hour.
	HoldFor time.Duration
}

// Hold reserves amount under the request's reservation id.
func (r Reservations) Hold(ctx context.Context, accountID, requestID string, amount money.Nanos) (string, error) {
	life := r.HoldFor
	if life <= 0 {
		life = time.Hour
	}
	return "", r.Store.Reserve(ctx, accountID, reservationID(requestID), amount, time.Now().Add(life))
}

// Done does nothing: writing the record releases the reservation.
func (Reservations) Done(string, string, money.Nanos) {}

// Cancel releases the request's own reservation; one that cannot be
// released now expires with its HoldFor.
func (r Reservations) Cancel(_, requestID, _ string, _ money.Nanos) {
	ctx, cancel := context.WithTimeout(context.Background(), cancelTimeout)
	defer cancel()
	_ = r.Store.Release(ctx, reservationID(requestID))
}

// cancelTimeout bounds releasing a refused request's reservation.
const cancelTimeout = 2 * time.Second

// Overdrawn does nothing: every hold is reserved in the database, which
// refuses it while the balance cannot cover it.
func (Reservations) Overdrawn(string) {}

// Budgets holds a request's most possible cost under every spend budget of
// its key and account (a budget.Holder).
type Budgets interface {
	// Hold holds amount under every budget; it returns the holds taken,
	// and a *budget.Exceeded when a budget cannot cover amount.
	Hold(ctx context.Context, accountID, keyID string, amount money.Nanos) ([]store.BudgetLease, error)
	// Done ends the request's holds in this replica.
	Done(holds []store.BudgetLease, amount money.Nanos)
	// Cancel gives back the holds of a request refused before anything
	// was sent, which no usage record will settle.
	Cancel(holds []store.BudgetLease, amount money.Nanos)
	// Overdrawn: the request was charged more than it held.
	Overdrawn(holds []store.BudgetLease)
}

// Usage receives one record per request; it must not lose them.
type Usage interface {
	Record(rec store.UsageRecord) error
}

// Options configure a Server. Zero values are documented per field.
type Options struct {
	// Config returns the configuration in force (it may be reloaded).
	Config func() *config.Config
	// InFlight counts each open step (an admission.Gate, which ext_authz
	// asks before it admits a new request); nil counts nothing.
	InFlight Counter
	Keys     Keys
	Usage    Usage
	// Refusals counts the requests the router step refuses before
	// admitting them (no usage record is written for those: nothing was
	// held or sent); nil counts none.
	Refusals refusal.Sink
	// Balance holds each request's most possible cost at admission, so
	// that concurrent requests cannot overdraw an account.
	Balance Balance
	// Budgets holds each request's most possible cost under its key's and
	// account's spend budgets, after the balance; nil means no budgets.
	Budgets Budgets
	// BudgetRefused is told the scope ("key" or "account") and period of
	// the budget named by each budget refusal (a metrics counter); nil
	// tells nothing.
	BudgetRefused func(scope, period string)
	// Health is the passive health of deployments: the upstream step tells
	// it every provider status, the router step asks it before admitting
	// a request and when listing models. Nil means every deployment of an
	// enabled provider is available.
	Health Health
	// Responses keeps the Responses API's stored responses (store: true,
	// previous_response_id, GET and DELETE /v1/responses/{id}); nil keeps
	// none: responses are answered and not stored.
	Responses Responses
	// StepKey signs what the router step hands to the upstream step, so
	// that an upstream step (a credential-bearing attempt) runs only for a
	// request the router step admitted, even for a caller that can reach
	// the gRPC port; and the router step verifies with it the decision
	// ext_authz signed (authz.Options.DecisionKey), so that it runs only
	// for a key and account ext_authz admitted. Every replica must share
	// it. Empty means no signature is made or checked (tests of one step
	// alone).
	StepKey []byte
	// Observer counts streams and messages (metrics.ExtProc); nil counts
	// nothing.
	Observer Observer
	// ProviderClient makes the one provider call ext_proc makes itself:
	// count_tokens to an Anthropic deployment (endpoint_messages.go), each
	// bounded by countTimeout. Nil means http.DefaultClient.
	ProviderClient *http.Client
	// Tokens counts the tokens of keys with token limits (tokens.go); nil
	// applies none.
	Tokens ratelimit.TokenLimiter
	// TokenClock is the clock of the token windows; nil means Now.
	TokenClock func() time.Time
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Counter counts a step in flight until the function Enter returns is
// called.
type Counter interface {
	Enter() (leave func())
}

// Observer counts the ext_proc protocol's work, by step, and the requests
// charged more than they held.
type Observer interface {
	Stream(step string)
	Message(step string)
	Overcharge(model, provider string)
}

type noObserver struct{}

func (noObserver) Stream(string)             {}
func (noObserver) Message(string)            {}
func (noObserver) Overcharge(string, string) {}

// overcharged reports a record that charges more than its request held:
// a provider billed beyond the limit it was sent (or a price the hold did
// not know). The record keeps the true cost and the account is debited in
// full; the log line and the counter tell the operator, and the account's
// holds go back to the database, which refuses them until the balance is
// positive again.
func (s *Server) overcharged(rec store.UsageRecord, held money.Nanos) {
	if held <= 0 || rec.Cost <= held {
		return
	}
	if s.opt.Budgets != nil && len(rec.BudgetLeases) > 0 {
		s.opt.Budgets.Overdrawn(rec.BudgetLeases)
	}
	if s.opt.Balance == nil {
		return
	}
	s.opt.Logger.Warn("a request was charged more than it held; the account is debited in full",
		"request_id", rec.RequestID, "usage_id", rec.ID, "key_id", rec.KeyID, "model", rec.Model, "provider", rec.Provider,
		"held_usd", held.String(), "charged_usd", rec.Cost.String())
	s.opt.Observer.Overcharge(rec.Model, rec.Provider)
	s.opt.Balance.Overdrawn(rec.AccountID)
}

// Health is the passive health of deployments (a health.Tracker).
type Health interface {
	Available(deploymentID string) bool
	Success(deploymentID string)
	Failure(deploymentID string)
}

// StreamWorkers is how many goroutines a gRPC server serving the steps
// keeps to run its calls (grpc.NumStreamWorkers). Without them every
// call, each ext_proc stream and each check, starts a goroutine whose
// stack grows by copying, several times, as the step's work deepens it:
// about 5% of the server's CPU per non-streamed request, measured under
// the bench's load. A worker keeps its grown stack from call to call.
// Calls beyond the workers (many open streams) get a goroutine each, as
// without them; workers that idle long have their stacks shrunk by the
// collector, so a few more than the usual concurrency cost little.
const StreamWorkers = 16

// Server implements envoy.service.ext_proc.v3.ExternalProcessor.
type Server struct {
	extprocv3.UnimplementedExternalProcessorServer
	opt       Options
	decisions decision.Key // from StepKey
}

// New returns a Server.
func New(opt Options) *Server {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	if opt.Observer == nil {
		opt.Observer = noObserver{}
	}
	if opt.ProviderClient == nil {
		opt.ProviderClient = http.DefaultClient
	}
	return &Server{opt: opt, decisions: decision.NewKey(opt.StepKey)}
}

// Process serves one ext_proc stream: one request's router step, or one
// attempt's upstream step, as the call's x-tollgate-step metadata says.
func (s *Server) Process(stream extprocv3.ExternalProcessor_ProcessServer) error {
	step := contract.StepRouter
	if md, ok := metadata.FromIncomingContext(stream.Context()); ok {
		if v := md.Get(contract.HeaderStep); len(v) > 0 {
			step = v[0]
		}
	}
	ctx := stream.Context()
	x, err := s.Open(ctx, step)
	if err != nil {
		return err
	}
	for {
		req, err := stream.Recv()
		if err != nil {
			x.Finish(err)
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				return nil
			}
			return err
		}
		resp, err := x.Handle(req)
		if err != nil {
			x.Finish(err)
			return err
		}
		if resp == nil {
			continue
		}
		if err := stream.Send(resp); err != nil {
			x.Finish(err)
			return err
		}
	}
}

// Session is one ext_proc stream's state, for a caller in the same process
// (the built-in edge's in-process binding) or for Process: the messages go
// in through Handle, and Finish ends it. A Session is not safe for
// concurrent use; its caller serialises Handle and Finish.
type Session struct {
	ctx  context.Context
	p    processor
	step string
	obs  Observer
	log  *slog.Logger
	// leave ends the session's count in Options.InFlight.
	leave func()
	// broken: a message's handling panicked; the request was answered
	// with an internal error and recorded, and the step is not used again.
	broken bool
}

// Open starts a session of one step (contract.StepRouter or StepUpstream);
// ctx is the stream's context (the request's, for the upstream step's
// provider calls and logs).
func (s *Server) Open(ctx context.Context, step string) (*Session, error) {
	var x *Session
	switch step {
	case contract.StepRouter, contract.StepRouterDirect, contract.StepRouterEdge:
		// The session and its step in one allocation.
		rs := new(routerSession)
		rs.r = routerStep{s: s, cfg: s.opt.Config(), direct: step != contract.StepRouter, noLog: step == contract.StepRouterEdge}
		x, step = &rs.x, contract.StepRouter
		x.p = &rs.r
	case contract.StepUpstream:
		us := new(upstreamSession)
		us.u = upstreamStep{s: s, cfg: s.opt.Config()}
		x = &us.x
		x.p = &us.u
	default:
		return nil, status.Errorf(codes.InvalidArgument, "unknown %s %q", contract.HeaderStep, step)
	}
	s.opt.Observer.Stream(step)
	x.ctx, x.step, x.obs, x.log, x.leave = ctx, step, s.opt.Observer, s.opt.Logger, noLeave
	if s.opt.InFlight != nil {
		x.leave = s.opt.InFlight.Enter()
	}
	return x, nil
}

// routerSession and upstreamSession are a session with its step.
type routerSession struct {
	x Session
	r routerStep
}

type upstreamSession struct {
	x Session
	u upstreamStep
}

func noLeave() {}

// Handle processes one message; a nil response means none is sent for it.
// An error ends the stream: the caller then calls Finish with it.
// A panic in the step is recovered (see recover.go): the request is
// answered with an internal error and recorded, and the process goes on.
func (x *Session) Handle(req *extprocv3.ProcessingRequest) (resp *extprocv3.ProcessingResponse, err error) {
	x.obs.Message(x.step)
	if x.broken {
		return afterPanic(req), nil
	}
	defer guard.Recover(panicWhere(x.step), x.log, func(*guard.Panic) string {
		x.broken = true
		resp, err = nil, errPanicked // should the answer below fail too
		resp, err = x.p.panicked(x.ctx, req), nil
		return x.p.logID()
	})
	return x.p.handle(x.ctx, req)
}

// Finish ends the session once, however it ended: io.EOF when the caller
// closed its side, a Canceled status when the caller went away, or the
// error that broke the stream. The step writes its usage record here.
func (x *Session) Finish(err error) {
	if x.leave != nil {
		defer x.leave()
	}
	defer guard.Recover(panicWhere(x.step), x.log, func(*guard.Panic) string { return x.p.logID() })
	x.p.finish(x.ctx, err)
}

// processor is one step's per-stream state machine.
type processor interface {
	handle(ctx context.Context, req *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error)
	// finish is called once when the stream ends, however it ends.
	finish(ctx context.Context, err error)
	// panicked answers the message whose handling panicked with an
	// internal error, and records the request as one (recover.go).
	panicked(ctx context.Context, req *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse
	// logID names the request in logs (the x-request-id header).
	logID() string
}

// headerMap reads an ext_proc header map into lowercase name → value.
// headerMap reads Envoy's header map; the raw values are copied into one
// string, which the map's values share.
func headerMap(hm *corev3.HeaderMap) map[string]string {
	hs := hm.GetHeaders()
	out := make(map[string]string, len(hs))
	size := 0
	for _, h := range hs {
		size += len(h.GetRawValue())
	}
	var all strings.Builder
	all.Grow(size)
	for _, h := range hs {
		all.Write(h.GetRawValue())
	}
	joined, at := all.String(), 0
	for _, h := range hs {
		v := h.GetValue()
		if n := len(h.GetRawValue()); n > 0 {
			v, at = joined[at:at+n], at+n
		}
		out[h.GetKey()] = v
	}
	return out
}

// headerValue is the value of one header of Envoy's map, found by a scan
// (the maps are short, and a map built to read one or two names costs
// more).
func headerValue(hm *corev3.HeaderMap, name string) (string, bool) {
	for _, h := range hm.GetHeaders() {
		if h.GetKey() == name {
			if raw := h.GetRawValue(); len(raw) > 0 {
				return string(raw), true
			}
			return h.GetValue(), true
		}
	}
	return "", false
}

// headerInt is a header's value as an integer, 0 when absent or not one.
func headerInt(hm *corev3.HeaderMap, name string) int {
	for _, h := range hm.GetHeaders() {
		if h.GetKey() == name {
			n := 0
			raw := h.GetRawValue()
			if len(raw) == 0 {
				raw = []byte(h.GetValue())
			}
			for _, c := range raw {
				if c < '0' || c > '9' || n > 1<<30 {
					return 0
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
	}
	return 0
}

// Usage record and reservation ids derive from the request id the router
// step draws, so that whichever step records a request, it is recorded once.
func usageID(requestID string) string       { return "use_" + requestID }
func reservationID(requestID string) string { return "rsv_" + requestID }
