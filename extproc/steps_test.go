package extproc

// The harness of the step tests (router_test.go, upstream_test.go): a
// Server over hand-written fakes of what its Options take, driven through
// Open and Session.Handle with the messages a proxy sends — no gRPC, no
// database, a fixed clock.

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// stepConfig has a priced model with image costs, a model on another
// provider type (Anthropic: parameters OpenAI takes that it refuses), a
// free model, a model whose only provider is disabled, and two plans.
const stepConfig = `
providers:
  - {name: openai, type: openai, base_url: "http://openai.test/v1", api_key: sk-test}
  - {name: anthropic, type: anthropic, base_url: "http://anthropic.test", api_key: sk-ant}
  - {name: off, type: openai, base_url: "http://off.test/v1", enabled: false}
models:
  - id: gpt-4o-mini
    max_tokens: 100
    input_price_per_million: 1
    output_price_per_million: 2
    image_tokens: 1000
    deployments: [{provider: openai, model: gpt-4o-mini-2024}]
  - id: claude
    max_tokens: 100
    input_price_per_million: 3
    output_price_per_million: 15
    deployments: [{provider: anthropic, model: claude-x}]
  - id: free
    max_tokens: 100
    deployments: [{provider: openai, model: free}]
  - id: gone
    max_tokens: 100
    deployments: [{provider: off, model: gone}]
plans:
  - {name: pro, models: ["*"]}
  - {name: small, models: ["free"]}
`

// rigAdding is a rig whose configuration is stepConfig with extra in
// place of its "models:" line: providers of its own, then "models:" and
// models of its own, before stepConfig's.
func rigAdding(t *testing.T, extra string) *rig {
	text := strings.Replace(stepConfig, "models:\n", extra, 1)
	return newRig(t, func(g *rig) {
		cfg, err := config.Parse([]byte(text), func(string) (string, bool) { return "", false })
		require.NoError(t, err)
		g.cfg = cfg
		g.opt.Config = func() *config.Config { return cfg }
	})
}

const (
	testKey     = "key_1"
	testAccount = "acct_1"
	testReqID   = "req-1"
)

// fakeKeys is Keys over two maps; err fails every lookup.
type fakeKeys struct {
	keys     map[string]store.Key
	accounts map[string]store.Account
	err      error
}

func (f *fakeKeys) KeyByID(_ context.Context, id string) (store.Key, error) {
	if f.err != nil {
		return store.Key{}, f.err
	}
	k, ok := f.keys[id]
	if !ok {
		return store.Key{}, store.ErrNotFound
	}
	return k, nil
}

func (f *fakeKeys) Account(_ context.Context, id string) (store.Account, error) {
	a, ok := f.accounts[id]
	if !ok {
		return store.Account{}, store.ErrNotFound
	}
	return a, nil
}

// fakeBalance is a Balance that grants every hold from lease (or refuses
// with err) and remembers them.
type fakeBalance struct {
	mu       sync.Mutex
	lease    string
	err      error
	holds    []money.Nanos
	done     []money.Nanos
	canceled []money.Nanos
}

func (b *fakeBalance) Hold(_ context.Context, _, _ string, amount money.Nanos) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.err != nil {
		return "", b.err
	}
	b.holds = append(b.holds, amount)
	return b.lease, nil
}

func (b *fakeBalance) Done(_, _ string, amount money.Nanos) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = append(b.done, amount)
}

func (b *fakeBalance) Cancel(_, _, _ string, amount money.Nanos) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.canceled = append(b.canceled, amount)
}

func (*fakeBalance) Overdrawn(string) {}

// fakeHealth marks the deployments in down unavailable and counts what the
// upstream step reports.
type fakeHealth struct {
	mu                  sync.Mutex
	down                map[string]bool
	successes, failures []string
}

func (h *fakeHealth) Available(id string) bool { return !h.down[id] }
func (h *fakeHealth) Success(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.successes = append(h.successes, id)
}
func (h *fakeHealth) Failure(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failures = append(h.failures, id)
}

// fakeResponses keeps stored responses in a map.
type fakeResponses struct {
	mu    sync.Mutex
	saved map[string]store.StoredResponse
}

func (f *fakeResponses) SaveResponse(_ context.Context, r store.StoredResponse) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.saved == nil {
		f.saved = map[string]store.StoredResponse{}
	}
	f.saved[r.ID] = r
	return nil
}

func (f *fakeResponses) ResponseByID(_ context.Context, accountID, id string, _ time.Time) (store.StoredResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.saved[id]
	if !ok || r.AccountID != accountID {
		return store.StoredResponse{}, store.ErrNotFound
	}
	return r, nil
}

func (f *fakeResponses) DeleteResponse(_ context.Context, accountID, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.saved[id]; !ok || r.AccountID != accountID {
		return store.ErrNotFound
	}
	delete(f.saved, id)
	return nil
}

// rig is a Server over fakes, at a fixed time.
type rig struct {
	t         *testing.T
	cfg       *config.Config
	keys      *fakeKeys
	balance   *fakeBalance
	health    *fakeHealth
	responses *fakeResponses
	usage     *recordedUsage
	refused   *countedRefusals
	now       time.Time
	opt       Options
	srv       *Server
}

// newRig builds a rig whose key testKey of account testAccount (plan pro)
// is enabled; change may alter the fakes and Options before the Server is
// made.
func newRig(t *testing.T, change ...func(*rig)) *rig {
	t.Helper()
	cfg, err := config.Parse([]byte(stepConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	g := &rig{t: t, cfg: cfg, now: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC),
		keys: &fakeKeys{
			keys:     map[string]store.Key{testKey: {ID: testKey, AccountID: testAccount, Enabled: true}},
			accounts: map[string]store.Account{testAccount: {ID: testAccount, Plan: "pro"}},
		},
		balance: &fakeBalance{lease: "lse_1"}, health: &fakeHealth{}, responses: &fakeResponses{}, usage: &recordedUsage{},
		refused: &countedRefusals{}}
	g.opt = Options{Config: func() *config.Config { return cfg }, Keys: g.keys, Usage: g.usage, Refusals: g.refused, Balance: g.balance,
		Health: g.health, Responses: g.responses, Now: func() time.Time { return g.now }}
	for _, c := range change {
		c(g)
	}
	g.srv = New(g.opt)
	return g
}

func (g *rig) open(step string) *Session {
	g.t.Helper()
	x, err := g.srv.Open(context.Background(), step)
	require.NoError(g.t, err)
	return x
}

// send hands one message to a session and returns its answer.
func (g *rig) send(x *Session, msg *extprocv3.ProcessingRequest) *extprocv3.ProcessingResponse {
	g.t.Helper()
	resp, err := x.Handle(msg)
	require.NoError(g.t, err)
	return resp
}

// admitted is a router step that admitted body: its session, and the
// answer to the body (its mutation and the request metadata).
func (g *rig) admitted(path, body string) (*Session, *extprocv3.ProcessingResponse) {
	g.t.Helper()
	x := g.open(contract.StepRouter)
	require.Nil(g.t, g.send(x, requestHeaders(path, "POST", false)).GetImmediateResponse())
	resp := g.send(x, requestBody(body))
	require.Nil(g.t, resp.GetImmediateResponse(), "admitted: %s", resp.GetImmediateResponse().GetBody())
	return x, resp
}

// attempt is an upstream step given the router step's answer for the
// deployment: its session and the answer to the body.
func (g *rig) attempt(routed *extprocv3.ProcessingResponse, deployment, clientBody string, attempt int) (*Session, *extprocv3.ProcessingResponse) {
	g.t.Helper()
	x := g.open(contract.StepUpstream)
	require.Nil(g.t, g.send(x, upstreamHeaders(routed, deployment, attempt)).GetImmediateResponse())
	body := clientBody
	if m := routed.GetRequestBody().GetResponse().GetBodyMutation(); m != nil {
		body = string(m.GetBody())
	}
	return x, g.send(x, requestBody(body))
}

// records is every record Usage received, and the same by id: what the
// database keeps, records being idempotent by id.
func (g *rig) records() (all []store.UsageRecord, stored map[string]store.UsageRecord) {
	all = g.usage.all()
	stored = map[string]store.UsageRecord{}
	for _, r := range all {
		if _, ok := stored[r.ID]; !ok {
			stored[r.ID] = r
		}
	}
	return all, stored
}

func headerList(kv ...string) *corev3.HeaderMap {
	hm := &corev3.HeaderMap{}
	for i := 0; i+1 < len(kv); i += 2 {
		hm.Headers = append(hm.Headers, &corev3.HeaderValue{Key: kv[i], RawValue: []byte(kv[i+1])})
	}
	return hm
}

// requestHeaders are a client's request headers as ext_authz left them
// (the identity headers of a step without a step key).
func requestHeaders(path, method string, end bool, extra ...string) *extprocv3.ProcessingRequest {
	kv := append([]string{":path", path, ":method", method, contract.HeaderRequestID, testReqID,
		contract.HeaderKeyID, testKey, contract.HeaderAccountID, testAccount, "authorization", "Bearer tg-secret"}, extra...)
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: headerList(kv...), EndOfStream: end}}}
}

func requestBody(body string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
		RequestBody: &extprocv3.HttpBody{Body: []byte(body), EndOfStream: true}}}
}

func responseHeaders(kv ...string) *extprocv3.ProcessingRequest {
	return &extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_ResponseHeaders{
		ResponseHeaders: &extprocv3.HttpHeaders{Headers: headerList(kv...)}}}
}

// upstreamHeaders are an attempt's request headers, with the metadata the
// router step set and the deployment Envoy picked.
func upstreamHeaders(routed *extprocv3.ProcessingResponse, deployment string, attempt int) *extprocv3.ProcessingRequest {
	meta := routed.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue()
	attrs, _ := structpb.NewStruct(map[string]any{contract.AttrDeployment: deployment})
	return &extprocv3.ProcessingRequest{
		Request: &extprocv3.ProcessingRequest_RequestHeaders{RequestHeaders: &extprocv3.HttpHeaders{
			Headers: headerList(":path", "/v1/chat/completions", ":method", "POST", contract.HeaderRequestID, testReqID,
				contract.HeaderAttemptCount, itoa(attempt), "authorization", "Bearer tg-secret", "content-type", "application/json"),
		}},
		MetadataContext: &corev3.Metadata{FilterMetadata: map[string]*structpb.Struct{contract.RequestMetadataNamespace: meta}},
		Attributes:      map[string]*structpb.Struct{contract.AttributesNamespace: attrs},
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// errorOf reads an immediate answer's status and OpenAI error.
func errorOf(t *testing.T, resp *extprocv3.ProcessingResponse) (int, oaierror.Error) {
	t.Helper()
	imm := resp.GetImmediateResponse()
	require.NotNil(t, imm, "an immediate answer: %v", resp)
	var body struct{ Error oaierror.Error }
	require.NoError(t, json.Unmarshal(imm.GetBody(), &body), "%s", imm.GetBody())
	return int(imm.GetStatus().GetCode()), body.Error
}

// openAIAnswer is a whole chat completion with usage.
const openAIAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini-2024",
"choices":[{"index":0,"message":{"role":"assistant","content":"Hello."},"finish_reason":"stop"}],
"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18}}`

// finish ends a session as the proxy does when the stream closes.
func finish(x *Session) { x.Finish(io.EOF) }

var gpt = config.DeploymentID("gpt-4o-mini", "openai", "gpt-4o-mini-2024")

const chatBody = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

// commonOf is the common part of an answer to a header or body message.
func commonOf(resp *extprocv3.ProcessingResponse) *extprocv3.CommonResponse {
	switch {
	case resp.GetRequestHeaders() != nil:
		return resp.GetRequestHeaders().GetResponse()
	case resp.GetRequestBody() != nil:
		return resp.GetRequestBody().GetResponse()
	case resp.GetResponseHeaders() != nil:
		return resp.GetResponseHeaders().GetResponse()
	case resp.GetResponseBody() != nil:
		return resp.GetResponseBody().GetResponse()
	}
	return nil
}
