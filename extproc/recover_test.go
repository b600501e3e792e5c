package extproc

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/internal/guard"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

type recordedUsage struct {
	mu   sync.Mutex
	recs []store.UsageRecord
}

func (r *recordedUsage) Record(rec store.UsageRecord) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec)
	return nil
}

// countedRefusals keeps the refusals the router step counts.
type countedRefusals struct {
	mu  sync.Mutex
	got []refusal.Refusal
}

func (c *countedRefusals) Count(r refusal.Refusal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, r)
}

func (c *countedRefusals) all() []refusal.Refusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]refusal.Refusal(nil), c.got...)
}

func (r *recordedUsage) all() []store.UsageRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]store.UsageRecord(nil), r.recs...)
}

// panickyAnswer is a provider's answer whose translation panics, after the
// provider reported some usage.
type panickyAnswer struct{ provider.Response }

func (panickyAnswer) Status(s int) int { return s }
func (panickyAnswer) Body([]byte, bool) ([]byte, error) {
	panic("index out of range [0] with length 0")
}
func (panickyAnswer) Usage() provider.Usage {
	return provider.Usage{PromptTokens: 12, CompletionTokens: 34, Reported: true}
}
func (panickyAnswer) Completion() string { return "" }
func (panickyAnswer) Failed() bool       { return false }
func (panickyAnswer) Completed() bool    { return false }

func bodyMsg(piece string, end bool) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseBody{
		ResponseBody: &extprocv3.HttpBody{Body: []byte(piece), EndOfStream: end}}}
}

// upstreamInStream is an upstream step in the middle of an answer (200,
// headers sent), with usage going to rec.
func upstreamInStream(t *testing.T, rec *recordedUsage, stream bool) (*Session, *upstreamStep) {
	cfg := testCfg(t)
	srv := New(Options{Config: func() *config.Config { return cfg }, Keys: noKeys{}, Usage: rec})
	m := &cfg.Models[0]
	target := provider.Target{Model: m, Deployment: &m.Deployments[0], Provider: &cfg.Providers[0]}
	u := &upstreamStep{s: srv, cfg: cfg, admission: admission{requestID: "r1", clientRequestID: "client-1", keyID: "k", accountID: "a",
		model: m, stream: stream, held: 5}, preq: provider.Request{Stream: stream}, target: target, part: &chatAttempt{}, resp: panickyAnswer{}, status: 200}
	return &Session{ctx: context.Background(), p: u, step: contract.StepUpstream, obs: noObserver{}, log: slog.Default()}, u
}

// TestAPanicMidStreamEndsTheStreamAndRecordsTheTokens: the answer's
// translation panics; the client's stream ends with one internal_error
// event (no [DONE]), the rest of the answer is dropped, the request has one
// usage record with the provider's counts, and the panic is counted.
func TestAPanicMidStreamEndsTheStreamAndRecordsTheTokens(t *testing.T) {
	rec := &recordedUsage{}
	x, _ := upstreamInStream(t, rec, true)
	before := guard.CountOf("extproc_upstream")
	resp, err := x.Handle(bodyMsg(`data: {"usage":null}`, false))
	require.NoError(t, err)
	out := string(resp.GetResponseBody().GetResponse().GetBodyMutation().GetBody())
	assert.True(t, strings.HasPrefix(out, `data: {"error":`), "%s", out)
	assert.Contains(t, out, `"code":"internal_error"`)
	assert.Contains(t, out, "client-1", "the message names the request")
	assert.NotContains(t, out, "[DONE]")
	assert.Equal(t, before+1, guard.CountOf("extproc_upstream"))

	more, err := x.Handle(bodyMsg("data: [DONE]\n\n", true))
	require.NoError(t, err)
	require.NotNil(t, more.GetResponseBody().GetResponse().GetBodyMutation())
	assert.Empty(t, more.GetResponseBody().GetResponse().GetBodyMutation().GetBody(), "the rest is dropped")
	x.Finish(io.EOF)

	recs := rec.all()
	require.Len(t, recs, 1)
	assert.Equal(t, 500, recs[0].Status)
	assert.Equal(t, "internal_error", recs[0].ErrorCode)
	assert.Equal(t, int64(12), recs[0].PromptTokens)
	assert.Equal(t, int64(34), recs[0].CompletionTokens)
	assert.Equal(t, "use_r1", recs[0].ID)
	assert.Equal(t, "rsv_r1", recs[0].ReservationID, "the record releases the hold")
}

// TestAPanicInAWholeAnswerIs500: the proxy holds a whole answer back until
// the step replies, so the client gets 500 internal_error (marked
// translated: the router step records it as it is).
func TestAPanicInAWholeAnswerIs500(t *testing.T) {
	rec := &recordedUsage{}
	x, _ := upstreamInStream(t, rec, false)
	resp, err := x.Handle(bodyMsg(`{}`, true))
	require.NoError(t, err)
	imm := resp.GetImmediateResponse()
	require.NotNil(t, imm)
	assert.EqualValues(t, 500, imm.GetStatus().GetCode())
	assert.Contains(t, string(imm.GetBody()), `"code":"internal_error"`)
	x.Finish(io.EOF)
	recs := rec.all()
	require.Len(t, recs, 1, "the tokens the provider produced are billed")
	assert.Equal(t, int64(34), recs[0].CompletionTokens)
}

type panickyKeys struct{}

func (panickyKeys) KeyByID(context.Context, string) (store.Key, error) {
	return store.Key{ID: "k", AccountID: "a", Enabled: true}, nil
}
func (panickyKeys) Account(context.Context, string) (store.Account, error) { panic("nil map") }

type doneBalance struct{ done int }

func (b *doneBalance) Hold(context.Context, string, string, money.Nanos) (string, error) {
	return "lease-1", nil
}
func (b *doneBalance) Done(string, string, money.Nanos)           { b.done++ }
func (b *doneBalance) Cancel(string, string, string, money.Nanos) {}
func (b *doneBalance) Overdrawn(string)                           {}

// TestARouterStepPanicIs500AndReleasesTheHold: a panic in the router step
// answers 500 internal_error, writes the request's record (with its hold),
// and the hold still goes back to its lease when the stream ends.
func TestARouterStepPanicIs500AndReleasesTheHold(t *testing.T) {
	cfg := testCfg(t)
	rec, bal := &recordedUsage{}, &doneBalance{}
	srv := New(Options{Config: func() *config.Config { return cfg }, Keys: panickyKeys{}, Usage: rec, Balance: bal})
	m, _ := cfg.Model("gpt-4o-mini")
	r := &routerStep{s: srv, cfg: cfg, admission: admission{requestID: "r2", clientRequestID: "client-2", accountID: "a", model: m,
		held: 5, leaseID: "lease-1"}}
	x := &Session{ctx: context.Background(), p: r, step: contract.StepRouter, obs: noObserver{}, log: slog.Default()}
	before := guard.CountOf("extproc_router")
	var hs []*corev3.HeaderValue
	for k, v := range map[string]string{":path": contract.PathChatCompletions, ":method": "POST",
		contract.HeaderKeyID: "k", contract.HeaderAccountID: "a", contract.HeaderRequestID: "client-2"} {
		hs = append(hs, &corev3.HeaderValue{Key: k, RawValue: []byte(v)})
	}
	_, err := x.Handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}}}})
	require.NoError(t, err)
	// Admission reads the account: it panics there.
	resp, err := x.Handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), EndOfStream: true}}})
	require.NoError(t, err)
	imm := resp.GetImmediateResponse()
	require.NotNil(t, imm, "%v", resp)
	assert.EqualValues(t, 500, imm.GetStatus().GetCode())
	assert.Contains(t, string(imm.GetBody()), `"code":"internal_error"`)
	assert.Equal(t, before+1, guard.CountOf("extproc_router"))
	x.Finish(io.EOF)
	recs := rec.all()
	require.Len(t, recs, 1)
	assert.Equal(t, 500, recs[0].Status)
	assert.Equal(t, "lease-1", recs[0].LeaseID)
	assert.Equal(t, 1, bal.done, "the hold goes back to its lease")
}

// brokenStep panics in everything, its answer to a panic included.
type brokenStep struct{}

func (brokenStep) handle(context.Context, *extprocv3.ProcessingRequest) (*extprocv3.ProcessingResponse, error) {
	panic("handle")
}
func (brokenStep) finish(context.Context, error) { panic("finish") }
func (brokenStep) panicked(context.Context, *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	panic("panicked")
}
func (brokenStep) logID() string { return "client-3" }

// TestASessionSurvivesAStepThatPanicsEverywhere: when even the answer to
// the panic panics, the stream fails with an error (the proxy answers
// 500), and Finish recovers too.
func TestASessionSurvivesAStepThatPanicsEverywhere(t *testing.T) {
	x := &Session{ctx: context.Background(), p: brokenStep{}, step: contract.StepRouter, obs: noObserver{}, log: slog.Default()}
	resp, err := x.Handle(bodyMsg("x", true))
	assert.Nil(t, resp)
	assert.ErrorIs(t, err, errPanicked)
	assert.NotPanics(t, func() { x.Finish(err) })
}
