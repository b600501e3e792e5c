// Package authz is Tollgate's Envoy ext_authz server: it admits a request
// only for a live API key (401), from an allowed address (403), within the
// key's per-minute rate (429) and with money in the account (402), and hands
// the key's identity to ext_proc in headers a client cannot forge: the
// router step trusts only the decision signed here (package decision).
// The key comes as OpenAI's clients send it (Authorization: Bearer) or as
// Anthropic's do (x-api-key); a refusal is in the shape the request's path
// reads (oaierror.ShapeOf).
package authz

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	rpcstatus "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/admission"
	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/authz/decision"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/refusal"
	"github.com/tollgate/tollgate/store"
)

// Keys is what authz needs of storage (a store.Cache in production).
type Keys interface {
	KeyByHash(ctx context.Context, h apikey.Hash) (store.Key, error)
	Account(ctx context.Context, id string) (store.Account, error)
}

// Admitter says whether a new request may begin (an admission.Gate).
type Admitter interface {
	Admit() bool
}

// Toucher records that a key was used; it must not block.
type Toucher interface {
	Touch(keyID string, at time.Time)
}

// Options configure a Server. Zero values are documented per field.
type Options struct {
	Keys    Keys
	Limiter ratelimit.Limiter
	// Config returns the configuration in force (it may be reloaded).
	Config func() *config.Config
	// Toucher batches Last Used updates; nil records nothing.
	Toucher Toucher
	// Refusals counts the requests refused for a known key (by status,
	// code and, since ext_authz reads no body, model ""); nil counts none.
	Refusals refusal.Sink
	// Spare is the free money this replica holds leased for the account
	// (balance.Leaser's Spare), which the account's available balance in
	// the database does not count; nil means none.
	Spare func(accountID string) money.Nanos
	// DecisionKey is the secret every replica shares (ext_proc's
	// StepKey): each admitted request carries its decision signed with it
	// (contract.HeaderDecision), which the router step verifies. Empty
	// signs none (tests of authz alone); a router step with a key then
	// refuses the request.
	DecisionKey []byte
	// Admission, when set, refuses new requests while the replica is at
	// capacity (503, Retry-After), before any other check; nil admits
	// every request.
	Admission Admitter
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Server implements envoy.service.auth.v3.Authorization.
type Server struct {
	authv3.UnimplementedAuthorizationServer
	opt      Options
	ips      prefixCache
	decision decision.Key
}

// prefixCache keeps parsed IP restrictions, so that a request does not parse
// its key's list again. Keyed by the list's text; cleared when it grows past
// maxPrefixLists (keys change rarely, so it refills quickly).
type prefixCache struct {
	mu sync.RWMutex
	m  map[string][]netip.Prefix
}

const maxPrefixLists = 10000

func (c *prefixCache) get(restrictions []string) ([]netip.Prefix, error) {
	k := strings.Join(restrictions, "\n")
	c.mu.RLock()
	p, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return p, nil
	}
	p, err := keyopts.ParseIPRestrictions(restrictions)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxPrefixLists {
		c.m = map[string][]netip.Prefix{}
	}
	c.m[k] = p
	c.mu.Unlock()
	return p, nil
}

// New returns a Server.
func New(opt Options) *Server {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &Server{opt: opt, decision: decision.NewKey(opt.DecisionKey)}
}

// Check decides one request, in the order docs/api.md fixes: key (401),
// address (403), rate (429), balance (402).
func (s *Server) Check(ctx context.Context, req *authv3.CheckRequest) (*authv3.CheckResponse, error) {
	httpReq := req.GetAttributes().GetRequest().GetHttp()
	shape := oaierror.ShapeOf(httpReq.GetPath())
	path, _, _ := strings.Cut(httpReq.GetPath(), "?")
	endpoint := contract.EndpointOf(path) // a refusal counts under it
	if s.opt.Admission != nil && !s.opt.Admission.Admit() {
		return deny(oaierror.Overloaded, shape, contract.SetHeaders("retry-after", strconv.Itoa(admission.RetryAfterSeconds))), nil
	}
	headers := httpReq.GetHeaders()
	now := s.opt.Now()
	cfg := s.opt.Config()

	secret, ok := secretOf(headers, cfg.KeyPrefix)
	if !ok {
		missing := oaierror.MissingAPIKey
		if shape == oaierror.ShapeAnthropic {
			missing = oaierror.MissingMessagesAPIKey
		}
		return deny(missing, shape, nil), nil
	}
	if apikey.Check(cfg.KeyPrefix, secret) != nil {
		return deny(oaierror.InvalidAPIKey, shape, nil), nil
	}
	key, err := s.opt.Keys.KeyByHash(ctx, apikey.HashOf(secret))
	if errors.Is(err, store.ErrNotFound) {
		return deny(oaierror.InvalidAPIKey, shape, nil), nil
	}
	if err != nil {
		s.opt.Logger.ErrorContext(ctx, "authz: key lookup failed", "err", err)
		return deny(oaierror.Internal, shape, nil), nil
	}
	if e, refused := s.keyRefusal(req, key, now); refused {
		return s.refuse(key, now, e, shape, endpoint, nil), nil
	}
	acct, err := s.opt.Keys.Account(ctx, key.AccountID)
	if err != nil {
		s.opt.Logger.ErrorContext(ctx, "authz: account lookup failed", "key_id", key.ID, "err", err)
		return s.refuse(key, now, oaierror.Internal, shape, endpoint, nil), nil
	}

	var rlHeaders []*corev3.HeaderValueOption
	if limit := s.limitFor(cfg, key, acct); limit > 0 {
		res, err := s.opt.Limiter.Allow(ctx, key.ID, limit, now)
		if err != nil {
			s.opt.Logger.ErrorContext(ctx, "authz: rate limiter failed", "key_id", key.ID, "err", err)
			return s.refuse(key, now, oaierror.Internal, shape, endpoint, nil), nil
		}
		rlHeaders = rateLimitHeaders(res)
		if !res.Allowed {
			// The time until a request would be admitted: whole seconds
			// (rounded up) for every client, milliseconds for OpenAI's
			// SDKs, which read retry-after-ms first.
			retry := int((res.Reset + time.Second - 1) / time.Second)
			millis := int64(max((res.Reset+time.Millisecond-1)/time.Millisecond, 1))
			rlHeaders = append(rlHeaders, contract.SetHeaders("retry-after", strconv.Itoa(retry),
				"retry-after-ms", strconv.FormatInt(millis, 10))...)
			return s.refuse(key, now, oaierror.RateLimited, shape, endpoint, rlHeaders), nil
		}
	}
	// A coarse check on what the replica knows; the router step holds the
	// request's most possible cost against the database, which is exact.
	// A request that is never charged (listing models, reading or deleting
	// a stored response, counting a message's tokens) needs no money.
	if charged(httpReq.GetMethod(), httpReq.GetPath()) {
		available := acct.Balance - acct.Reserved
		if available <= 0 && s.opt.Spare != nil {
			available += s.opt.Spare(acct.ID)
		}
		if available <= 0 {
			return s.refuse(key, now, oaierror.InsufficientBalance, shape, endpoint, rlHeaders), nil
		}
	}
	if s.opt.Toucher != nil {
		s.opt.Toucher.Touch(key.ID, now)
	}
	return s.allow(key, headers[contract.HeaderRequestID], now, shape, rlHeaders), nil
}

// keyRefusal is the refusal a known key's request gets for the key itself
// or the caller's address, if any.
func (s *Server) keyRefusal(req *authv3.CheckRequest, key store.Key, now time.Time) (oaierror.Error, bool) {
	switch {
	case !key.Enabled:
		return oaierror.KeyDisabled, true
	case key.Expired(now):
		return oaierror.KeyExpired, true
	case key.GraceUntil != nil && !now.Before(*key.GraceUntil):
		// The secret a rotation replaced, past its grace period.
		return oaierror.InvalidAPIKey, true
	case len(key.IPRestrictions) > 0 && !s.allowedIP(key.IPRestrictions, sourceAddr(req)):
		return oaierror.IPNotAllowed, true
	}
	return oaierror.Error{}, false
}

// refuse denies a known key's request and counts the refusal for the key,
// under the endpoint its path calls.
func (s *Server) refuse(key store.Key, now time.Time, e oaierror.Error, shape oaierror.Shape, endpoint string, extra []*corev3.HeaderValueOption) *authv3.CheckResponse {
	if s.opt.Refusals != nil {
		s.opt.Refusals.Count(refusal.Refusal{KeyID: key.ID, AccountID: key.AccountID, Status: e.Status, Code: e.Code,
			Endpoint: endpoint, Message: e.Message, At: now})
	}
	return deny(e, shape, extra)
}

// charged reports whether a request may cost money: every request but
// the free routes (GET /v1/models and /v1/models/{id}, GET and DELETE
// /v1/responses/{id}, POST /v1/messages/count_tokens), which cost no
// provider's tokens. An unknown route is charged: it gets its 404 only
// with money in the account, so no route is free by mistake.
func charged(method, path string) bool {
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	switch method {
	case "POST":
		return path != contract.PathCountTokens
	case "GET":
		if path == contract.PathModels || strings.HasPrefix(path, contract.PathModels+"/") {
			return false
		}
		fallthrough
	case "DELETE":
		id, ok := strings.CutPrefix(path, contract.PathResponses+"/")
		return !ok || id == ""
	}
	return true
}

// limitFor is the key's own limit, or its plan's default when the key's is
// Off; 0 means unlimited.
func (s *Server) limitFor(cfg *config.Config, key store.Key, acct store.Account) int {
	if key.RateLimitRPM != nil {
		return *key.RateLimitRPM
	}
	if p, ok := cfg.Plan(acct.Plan); ok {
		return p.DefaultRPM
	}
	return 0
}

// secretOf is the key the request carries: in Authorization as a bearer
// token (OpenAI's clients, and Claude Code's ANTHROPIC_AUTH_TOKEN) or in
// x-api-key (Anthropic's SDKs, ANTHROPIC_API_KEY). A client may send both,
// one of them another service's credential (a real Anthropic key left in
// the environment): the first of the two in Tollgate's key format is the
// key, Authorization first; with neither in it, the first present (which
// the caller refuses as invalid). Whatever is not taken is refused with it
// or stripped before any provider.
func secretOf(headers map[string]string, prefix string) (string, bool) {
	fromBearer, hasBearer := bearer(headers["authorization"])
	fromHeader := strings.TrimSpace(headers["x-api-key"])
	switch {
	case hasBearer && (fromHeader == "" || apikey.Check(prefix, fromBearer) == nil || apikey.Check(prefix, fromHeader) != nil):
		return fromBearer, true
	case fromHeader != "":
		return fromHeader, true
	}
	return "", false
}

func bearer(h string) (string, bool) {
	const prefix = "bearer "
	if len(h) <= len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return "", false
	}
	s := strings.TrimSpace(h[len(prefix):])
	return s, s != ""
}

// sourceAddr is the caller's address as the edge determined it (the TCP
// peer, or the X-Forwarded-For entry its trusted-hops setting selects):
// contract.HeaderClientAddress, which both edges set over the client's,
// else the source peer (which Envoy fills with the TCP peer only).
func sourceAddr(req *authv3.CheckRequest) netip.Addr {
	addr := req.GetAttributes().GetRequest().GetHttp().GetHeaders()[contract.HeaderClientAddress]
	if addr == "" {
		addr = req.GetAttributes().GetSource().GetAddress().GetSocketAddress().GetAddress()
	}
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func (s *Server) allowedIP(restrictions []string, addr netip.Addr) bool {
	if !addr.IsValid() {
		return false
	}
	prefixes, err := s.ips.get(restrictions)
	if err != nil {
		return false // a stored entry that no longer parses admits nobody
	}
	for _, p := range prefixes {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// rateLimitHeaders are OpenAI's: the limit, what is left of it, and the
// time until it resets as OpenAI writes durations ("1s", "6m0s", "17ms").
func rateLimitHeaders(r ratelimit.Result) []*corev3.HeaderValueOption {
	reset := max(r.Reset, 0).Round(time.Millisecond)
	return contract.SetHeaders(
		"x-ratelimit-limit-requests", strconv.Itoa(r.Limit),
		"x-ratelimit-remaining-requests", strconv.Itoa(r.Remaining),
		"x-ratelimit-reset-requests", reset.String(),
	)
}

// removedByAuthz are the internal headers other than the identity and
// the decision, which no client may send on; removedUnsigned adds the
// decision, for a server that signs none (read-only: every answer shares
// the slices). A header ext_authz sets is never in its remove list: Envoy
// removes after it sets.
var removedByAuthz, removedUnsigned = func() ([]string, []string) {
	var out []string
	for _, h := range contract.InternalHeaders {
		if h != contract.HeaderKeyID && h != contract.HeaderAccountID && h != contract.HeaderDecision {
			out = append(out, h)
		}
	}
	return out, append(out[:len(out):len(out)], contract.HeaderDecision)
}()

// allow admits the request of the given x-request-id. The identity
// headers and the signed decision overwrite whatever the client sent; the
// other internal headers are removed, so nothing downstream can be forged.
func (s *Server) allow(key store.Key, requestID string, now time.Time, shape oaierror.Shape, responseHeaders []*corev3.HeaderValueOption) *authv3.CheckResponse {
	set := contract.SetHeaders(contract.HeaderKeyID, key.ID, contract.HeaderAccountID, key.AccountID)
	remove := removedUnsigned
	if !s.decision.IsZero() {
		signed := s.decision.Sign(decision.Decision{KeyID: key.ID, AccountID: key.AccountID, RequestID: requestID,
			Expires: now.Add(decision.Lifetime)})
		set = contract.SetHeaders(contract.HeaderKeyID, key.ID, contract.HeaderAccountID, key.AccountID, contract.HeaderDecision, signed)
		remove = removedByAuthz
	}
	a := new(allowance)
	a.http.Headers, a.http.HeadersToRemove, a.http.ResponseHeadersToAdd = set, remove, responseHeaders
	a.ok.OkResponse = &a.http
	a.resp.Status, a.resp.HttpResponse = &a.status, &a.ok
	resp := &a.resp
	resp.DynamicMetadata = openAIShape
	if shape == oaierror.ShapeAnthropic {
		resp.DynamicMetadata = anthropicShape
	}
	return resp
}

// allowance is an admission's answer in one allocation (its status is OK,
// the zero code).
type allowance struct {
	resp   authv3.CheckResponse
	status rpcstatus.Status
	ok     authv3.CheckResponse_OkResponse
	http   authv3.OkHttpResponse
}

// openAIShape and anthropicShape are the dynamic metadata of an admitted
// request: the error shape of its path (read-only: every answer shares
// them). Envoy's local-reply mappers read it (envoy/xds/listener.yaml).
var openAIShape, anthropicShape = shapeMetadata(contract.ShapeOpenAI), shapeMetadata(contract.ShapeAnthropic)

func shapeMetadata(shape string) *structpb.Struct {
	return &structpb.Struct{Fields: map[string]*structpb.Value{contract.AuthzMetaShape: structpb.NewStringValue(shape)}}
}

// deny refuses the request with e, in the shape its path's clients read.
func deny(e oaierror.Error, shape oaierror.Shape, extra []*corev3.HeaderValueOption) *authv3.CheckResponse {
	headers := append(contract.SetHeaders("content-type", "application/json"), extra...)
	return &authv3.CheckResponse{
		Status: &rpcstatus.Status{Code: int32(codes.PermissionDenied)},
		HttpResponse: &authv3.CheckResponse_DeniedResponse{DeniedResponse: &authv3.DeniedHttpResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode(e.Status)},
			Headers: headers,
			Body:    string(e.BodyFor(shape)),
		}},
	}
}
