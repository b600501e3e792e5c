package extproc

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/authz/decision"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/store"
)

// someKeys is a key cache with fixed keys and accounts, which notes the
// keys it was asked for.
type someKeys struct {
	keys  map[string]store.Key
	mu    sync.Mutex
	asked []string
}

func (k *someKeys) KeyByID(_ context.Context, id string) (store.Key, error) {
	k.mu.Lock()
	k.asked = append(k.asked, id)
	k.mu.Unlock()
	if key, ok := k.keys[id]; ok {
		return key, nil
	}
	return store.Key{}, store.ErrNotFound
}

func (k *someKeys) Account(_ context.Context, id string) (store.Account, error) {
	return store.Account{ID: id, Plan: "pro"}, nil
}

// usageLog keeps the records it is given.
type usageLog struct {
	mu   sync.Mutex
	recs []store.UsageRecord
}

func (u *usageLog) Record(r store.UsageRecord) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.recs = append(u.recs, r)
	return nil
}

func (u *usageLog) len() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return len(u.recs)
}

var (
	stepKey   = []byte("the replicas' shared step key")
	identNow  = time.Unix(1750000000, 0)
	yesterday = identNow.Add(-24 * time.Hour)
)

func identityServer(t *testing.T) (*Server, *someKeys, *usageLog) {
	t.Helper()
	cfg := testCfg(t)
	keys := &someKeys{keys: map[string]store.Key{
		"key_mine":     {ID: "key_mine", AccountID: "acct_mine", Enabled: true},
		"key_victim":   {ID: "key_victim", AccountID: "acct_victim", Enabled: true},
		"key_disabled": {ID: "key_disabled", AccountID: "acct_mine", Enabled: false},
		"key_expired":  {ID: "key_expired", AccountID: "acct_mine", Enabled: true, ExpiresAt: &yesterday},
	}}
	usage := &usageLog{}
	s := New(Options{Config: func() *config.Config { return cfg }, Keys: keys, Usage: usage, StepKey: stepKey,
		Now: func() time.Time { return identNow }})
	return s, keys, usage
}

func signedFor(keyID, accountID, requestID string, expires time.Time) string {
	return decision.NewKey(stepKey).Sign(decision.Decision{KeyID: keyID, AccountID: accountID, RequestID: requestID, Expires: expires})
}

// routerHeaders plays the router step's request headers with the given
// extra headers (name, value, …) and returns its answer.
func routerHeaders(t *testing.T, s *Server, extra ...string) *extprocv3.ProcessingResponse {
	t.Helper()
	x, err := s.Open(context.Background(), contract.StepRouter)
	require.NoError(t, err)
	t.Cleanup(func() { x.Finish(context.Canceled) })
	hs := []*corev3.HeaderValue{
		{Key: ":method", RawValue: []byte("POST")}, {Key: ":path", RawValue: []byte(contract.PathChatCompletions)},
		{Key: contract.HeaderRequestID, RawValue: []byte("req-1")},
	}
	for i := 0; i+1 < len(extra); i += 2 {
		hs = append(hs, &corev3.HeaderValue{Key: extra[i], RawValue: []byte(extra[i+1])})
	}
	resp, err := x.Handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestHeaders{
		RequestHeaders: &extprocv3.HttpHeaders{Headers: &corev3.HeaderMap{Headers: hs}},
	}})
	require.NoError(t, err)
	if resp.GetImmediateResponse() == nil {
		// Admitted: the body gives the identity the upstream step gets.
		resp, err = x.Handle(&extprocv3.ProcessingRequest{Request: &extprocv3.ProcessingRequest_RequestBody{
			RequestBody: &extprocv3.HttpBody{Body: []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`), EndOfStream: true},
		}})
		require.NoError(t, err)
	}
	return resp
}

func TestTheRouterStepTakesItsIdentityOnlyFromAVerifiedDecision(t *testing.T) {
	s, keys, usage := identityServer(t)
	resp := routerHeaders(t, s,
		contract.HeaderDecision, signedFor("key_mine", "acct_mine", "req-1", identNow.Add(time.Minute)),
		// Plain headers claiming another key: ignored.
		contract.HeaderKeyID, "key_victim", contract.HeaderAccountID, "acct_victim")
	require.Nil(t, resp.GetImmediateResponse(), "admitted: %v", resp)
	meta := resp.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()
	assert.Equal(t, "key_mine", meta[contract.MetaKeyID].GetStringValue())
	assert.Equal(t, "acct_mine", meta[contract.MetaAccountID].GetStringValue())
	assert.True(t, validStepToken(stepKey, meta, identNow))
	assert.NotContains(t, keys.asked, "key_victim")
	assert.Zero(t, usage.len())
}

func TestTheRouterStepRefusesARequestExtAuthzDidNotAdmit(t *testing.T) {
	other := decision.NewKey([]byte("a guess")).Sign(decision.Decision{KeyID: "key_victim", AccountID: "acct_victim", RequestID: "req-1", Expires: identNow.Add(time.Minute)})
	good := signedFor("key_victim", "acct_victim", "req-1", identNow.Add(time.Minute))
	altered := []byte(good)
	altered[len("v1.")+2] ^= 'A' ^ 'B' // a payload byte
	for name, tc := range map[string]struct {
		headers []string
		status  uint32
		code    string
	}{
		"plain headers alone":          {[]string{contract.HeaderKeyID, "key_victim", contract.HeaderAccountID, "acct_victim"}, 500, "internal_error"},
		"a decision signed by a guess": {[]string{contract.HeaderDecision, other}, 500, "internal_error"},
		"an altered decision":          {[]string{contract.HeaderDecision, string(altered)}, 500, "internal_error"},
		"another request's":            {[]string{contract.HeaderDecision, signedFor("key_victim", "acct_victim", "req-0", identNow.Add(time.Minute))}, 500, "internal_error"},
		"no request id in it":          {[]string{contract.HeaderDecision, signedFor("key_victim", "acct_victim", "", identNow.Add(time.Minute))}, 500, "internal_error"},
		"expired":                      {[]string{contract.HeaderDecision, signedFor("key_victim", "acct_victim", "req-1", identNow)}, 500, "internal_error"},
		"a key of another account":     {[]string{contract.HeaderDecision, signedFor("key_mine", "acct_victim", "req-1", identNow.Add(time.Minute))}, 500, "internal_error"},
		"a key deleted since":          {[]string{contract.HeaderDecision, signedFor("key_gone", "acct_mine", "req-1", identNow.Add(time.Minute))}, 401, "invalid_api_key"},
		"a key disabled since":         {[]string{contract.HeaderDecision, signedFor("key_disabled", "acct_mine", "req-1", identNow.Add(time.Minute))}, 401, "key_disabled"},
		"a key expired since":          {[]string{contract.HeaderDecision, signedFor("key_expired", "acct_mine", "req-1", identNow.Add(time.Minute))}, 401, "key_expired"},
	} {
		t.Run(name, func(t *testing.T) {
			s, _, usage := identityServer(t)
			var logs syncLog
			s.opt.Logger = logs.logger()
			resp := routerHeaders(t, s, tc.headers...)
			imm := resp.GetImmediateResponse()
			require.NotNil(t, imm, "refused")
			assert.EqualValues(t, tc.status, imm.GetStatus().GetCode())
			assert.Contains(t, string(imm.GetBody()), `"code":"`+tc.code+`"`)
			if tc.status == 500 {
				assert.Contains(t, string(imm.GetBody()), "req-1", "the error names the request")
			}
			assert.Zero(t, usage.len(), "nothing is recorded against an identity not proven")
			for _, h := range tc.headers {
				if len(h) > 40 {
					assert.NotContains(t, logs.String(), h, "the decision is never logged")
				}
			}
		})
	}
}

// syncLog is a log sink a test can read.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *syncLog) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }
