// Package restapi is the management service's HTTP door: the REST API
// under /api/v1/. Every call needs a management token (Authorization:
// Bearer tg_mt_…); answers are JSON, errors in OpenAI's shape. It owns what
// is HTTP about the calls — routing, reading bodies and queries, the
// per-token rate limit, Idempotency-Key, the wire shapes — and nothing
// else: every rule (who may do what, caps, the key options) is the
// management service's (package manage), which it calls through Service.
// openapi.json describes it all and is served at /api/v1/openapi.json; a
// client generated from it (internal/apiclient) drives every endpoint in
// the tests.
package restapi

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// OpenAPI is the API's OpenAPI 3.1 document.
//
//go:embed openapi.json
var OpenAPI []byte

// Options configure an API.
type Options struct {
	// Store keeps the answers of calls made with an Idempotency-Key;
	// store.Open's stores will do.
	Store Idempotency
	// Config is the configuration in force (limits.management_rpm).
	Config func() *config.Config
	// Limiter counts the calls per management token
	// (configuration: limits.management_rpm); nil → ratelimit.NewMemory().
	// Give every replica the same (Redis) limiter so the counts are shared.
	Limiter ratelimit.Limiter
	// Now is the clock; nil → time.Now.
	Now func() time.Time
	// Random is the source of the nonces that seal idempotent answers;
	// nil → crypto/rand.Reader.
	Random io.Reader
	// Logger receives failures (never secrets); nil → slog.Default().
	Logger *slog.Logger
}

// API serves /api/v1/ (Handler).
type API struct {
	svc Service
	opt Options
}

// New returns an API over the management service svc.
func New(svc Service, opt Options) (*API, error) {
	if svc == nil || opt.Store == nil || opt.Config == nil {
		return nil, errors.New("restapi: the service, Options.Store and Options.Config are required")
	}
	if opt.Limiter == nil {
		opt.Limiter = ratelimit.NewMemory()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Random == nil {
		opt.Random = rand.Reader
	}
	if opt.Logger == nil {
		opt.Logger = slog.Default()
	}
	return &API{svc: svc, opt: opt}, nil
}

// fail is a failure the caller did not cause: logged, answered 500.
func (api *API) fail(ctx context.Context, what string, err error) error {
	api.opt.Logger.ErrorContext(ctx, "restapi: "+what, "err", err)
	return oaierror.Internal
}

// auditActionRE is the shape of an action's name (GET /api/v1/audit's
// action filter).
var auditActionRE = regexp.MustCompile(`^[a-z]+\.[a-z_]+$`)

// maxRequestBody bounds a management call's body.
const maxRequestBody = 64 << 10

// route is one call of the API: its ServeMux pattern and handler.
type route struct {
	pattern string
	handle  handler
}

// routes are every authenticated call; the OpenAPI document describes each
// (a test holds the two equal).
func (api *API) routes() []route {
	return []route{
		{"GET /api/v1/keys", api.listKeys},
		{"POST /api/v1/keys", api.createKey},
		{"GET /api/v1/keys/{id}", api.getKey},
		{"PATCH /api/v1/keys/{id}", api.patchKey},
		{"DELETE /api/v1/keys/{id}", api.deleteKey},
		{"POST /api/v1/keys/{id}/enable", api.enableKey(true)},
		{"POST /api/v1/keys/{id}/disable", api.enableKey(false)},
		{"POST /api/v1/keys/{id}/rotate", api.rotateKey},
		{"GET /api/v1/tokens", api.listTokens},
		{"POST /api/v1/tokens", api.createToken},
		{"DELETE /api/v1/tokens/{id}", api.revokeToken},
		{"GET /api/v1/audit", api.listAudit},
		{"GET /api/v1/usage", api.usage},
		{"GET /api/v1/usage/records", api.usageRecords},
		{"POST /api/v1/accounts", api.createAccount},
		{"GET /api/v1/accounts/{id}", api.getAccount},
		{"PATCH /api/v1/accounts/{id}", api.patchAccount},
		{"POST /api/v1/accounts/{id}/credit", api.creditAccount},
		{"GET /api/v1/accounts/{id}/balance", api.balanceHistory},
		{"GET /api/v1/models", api.listModels},
		{"GET /api/v1/keys/{id}/budgets", getBudgets(api.svc.KeyBudgets)},
		{"PUT /api/v1/keys/{id}/budgets", putBudgets(api.svc.SetKeyBudgets)},
		{"GET /api/v1/accounts/{id}/budgets", api.getAccountBudgets},
		{"PUT /api/v1/accounts/{id}/budgets", api.putAccountBudgets},
		{"GET /api/v1/teams", api.listTeams},
		{"POST /api/v1/teams", api.createTeam},
		{"GET /api/v1/teams/{id}", api.getTeam},
		{"PATCH /api/v1/teams/{id}", api.patchTeam},
		{"DELETE /api/v1/teams/{id}", api.deleteTeam},
		{"GET /api/v1/teams/{id}/budgets", getBudgets(api.svc.TeamBudgets)},
		{"PUT /api/v1/teams/{id}/budgets", putBudgets(api.svc.SetTeamBudgets)},
		{"GET /api/v1/accounts/{id}/sso", api.getAccountSSO},
		{"PATCH /api/v1/accounts/{id}/sso", api.patchAccountSSO},
		{"GET /api/v1/teams/{id}/members", api.listTeamMembers},
		{"PUT /api/v1/teams/{id}/members/{member_id}", api.putTeamMember},
		{"DELETE /api/v1/teams/{id}/members/{member_id}", api.deleteTeamMember},
		{"PUT /api/v1/keys/{id}/team", api.putKeyTeam},
		{"GET /api/v1/webhooks", api.listWebhooks},
		{"POST /api/v1/webhooks", api.createWebhook},
		{"GET /api/v1/webhooks/{id}", api.getWebhook},
		{"PATCH /api/v1/webhooks/{id}", api.patchWebhook},
		{"DELETE /api/v1/webhooks/{id}", api.deleteWebhook},
		{"POST /api/v1/webhooks/{id}/test", api.testWebhook},
		{"GET /api/v1/webhooks/{id}/deliveries", api.webhookDeliveries},
		{"GET /api/v1/accounts/{id}/members", api.listMembers},
		{"PATCH /api/v1/accounts/{id}/members/{member_id}", api.patchMember},
		{"DELETE /api/v1/accounts/{id}/members/{member_id}", api.deleteMember},
		{"GET /api/v1/accounts/{id}/invitations", api.listInvitations},
		{"POST /api/v1/accounts/{id}/invitations", api.createInvitation},
		{"DELETE /api/v1/accounts/{id}/invitations/{invitation_id}", api.deleteInvitation},
	}
}

// openAPIPattern serves the document itself, without a token.
const openAPIPattern = "GET /api/v1/openapi.json"

// Handler serves /api/v1/.
func (api *API) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(openAPIPattern, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(OpenAPI)
	})
	query := documentedQuery()
	for _, rt := range api.routes() {
		mux.HandleFunc(rt.pattern, api.authed(withQuery(query[rt.pattern], rt.handle)))
	}
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		// Authentication first: without a token nothing is told, not even
		// which paths exist.
		if _, _, err := api.actor(r); err != nil {
			writeError(w, err)
			return
		}
		if allowed := allowedMethods(mux, r); len(allowed) > 0 {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, oaierror.MethodNotAllowed.With(oaierror.Clip(r.Method, 20)+" is not a method of "+oaierror.Clip(r.URL.Path, 200)+": use "+strings.Join(allowed, ", ")+".", ""))
			return
		}
		writeError(w, oaierror.NotFound.With("No such management API call: "+oaierror.Clip(r.Method+" "+r.URL.Path, 200)+" (see /api/v1/openapi.json).", ""))
	})
	return mux
}

// documentedQuery is, by route pattern ("GET /api/v1/keys"), the query
// parameters the document lists for it, each with the values it
// enumerates (nil: any value).
func documentedQuery() map[string]map[string][]string {
	var d struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	out := map[string]map[string][]string{}
	if err := json.Unmarshal(OpenAPI, &d); err != nil {
		return out // the document's own test fails first
	}
	for path, ops := range d.Paths {
		for method, raw := range ops {
			var op struct {
				Parameters []struct {
					Name   string `json:"name"`
					In     string `json:"in"`
					Schema struct {
						Enum []string `json:"enum"`
					} `json:"schema"`
				} `json:"parameters"`
			}
			if json.Unmarshal(raw, &op) != nil {
				continue // the path's own parameters: a list, not an operation
			}
			pattern := strings.ToUpper(method) + " " + path
			out[pattern] = map[string][]string{}
			for _, p := range op.Parameters {
				if p.In == "query" {
					out[pattern][p.Name] = p.Schema.Enum
				}
			}
		}
	}
	return out
}

// withQuery refuses, before h runs, a query parameter the document does
// not list for the call, and one given with a value its enumeration does
// not hold (an empty one included).
func withQuery(params map[string][]string, h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
		if !plainText(r.URL.Path) {
			return oaierror.Invalid("invalid_request", "", notText("The path"))
		}
		for name, got := range r.URL.Query() {
			values, known := params[name]
			if !known {
				return oaierror.Invalid("invalid_request", oaierror.Clip(name, 60), "Unknown query parameter "+strconv.Quote(oaierror.Clip(name, 60))+" (see /api/v1/openapi.json).")
			}
			for _, v := range got {
				if !plainText(v) {
					return oaierror.Invalid("invalid_request", name, notText(name))
				}
				if values != nil && !slices.Contains(values, v) {
					return oaierror.Invalid("invalid_request", name, name+" must be one of "+strings.Join(values, ", ")+".")
				}
			}
		}
		return h(w, r, a)
	}
}

// plainText reports whether s is text every database stores: valid UTF-8
// without NUL (PostgreSQL's text refuses both). Nothing stored has either,
// so a name or id with one could only fail the call that sends it.
func plainText(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

func notText(what string) string {
	return what + " must be UTF-8 text without NUL characters."
}

// nulEscape matches a JSON string escape of NUL (\u0000) not itself
// escaped: the one way a JSON text can carry a NUL (JSON's strings hold no
// raw control characters, and Go's decoder makes invalid UTF-8 U+FFFD).
var nulEscape = regexp.MustCompile(`(^|[^\\])(\\\\)*\\u0000`)

// apiMethods are the methods the API's routes use.
var apiMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// allowedMethods are the methods mux routes r's path by, other than its
// catch-all; none when the path is no call's.
func allowedMethods(mux *http.ServeMux, r *http.Request) []string {
	var out []string
	for _, m := range apiMethods {
		probe := &http.Request{Method: m, URL: r.URL, Host: r.Host, Header: http.Header{}}
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/api/v1/" {
			out = append(out, m)
		}
	}
	return out
}

// actor authenticates the request's bearer token.
// It returns the token's secret too, kept for the call only (never stored,
// never logged): the key that seals its idempotent answers.
func (api *API) actor(r *http.Request) (manage.Actor, string, error) {
	secret, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return manage.Actor{}, "", manage.ErrUnauthorized
	}
	secret = strings.TrimSpace(secret)
	addr, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		addr = r.RemoteAddr
	}
	a, err := api.svc.Authenticate(r.Context(), secret, addr)
	return a, secret, err
}

type handler func(w http.ResponseWriter, r *http.Request, a manage.Actor) error

func (api *API) authed(h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		a, secret, err := api.actor(r)
		if err == nil {
			err = api.admit(w, r, a)
		}
		if err == nil {
			err = api.idempotent(w, r, a, secret, h)
		}
		if err != nil {
			writeError(w, err)
		}
	}
}

// rateLimitKey names a token's counter of calls: its id, never its secret.
func rateLimitKey(tokenID string) string { return "api-v1:" + tokenID }

// admit counts the call against its token's limit per minute
// (configuration: limits.management_rpm) and sets OpenAI's x-ratelimit-*
// headers; past the limit it refuses the call, 429 with Retry-After (whole
// seconds, rounded up) and retry-after-ms, before anything is done.
func (api *API) admit(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	limit := manage.Limits(api.opt.Config()).ManagementRPM
	res, err := api.opt.Limiter.Allow(r.Context(), rateLimitKey(a.ID), limit, api.opt.Now())
	if err != nil {
		return api.fail(r.Context(), "rate limiter", err)
	}
	h := w.Header()
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(res.Limit))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(res.Remaining))
	h.Set("x-ratelimit-reset-requests", max(res.Reset, 0).Round(time.Millisecond).String())
	if res.Allowed {
		return nil
	}
	h.Set("Retry-After", strconv.Itoa(int((res.Reset+time.Second-1)/time.Second)))
	h.Set("retry-after-ms", strconv.FormatInt(int64(max((res.Reset+time.Millisecond-1)/time.Millisecond, 1)), 10))
	return oaierror.RateLimited.With(fmt.Sprintf("This management token made %d calls this minute, as many as it may: retry after the time in Retry-After.", limit), "")
}

func writeError(w http.ResponseWriter, err error) {
	var e oaierror.Error
	if !errors.As(err, &e) {
		e = oaierror.Internal
	}
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="tollgate-management"`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body())
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// readBody decodes a JSON object body into fields, refusing unknown
// fields, bodies too large, and anything that is not one JSON object (an
// empty body too: the document requires one).
func readBody(r *http.Request, known ...string) (map[string]json.RawMessage, error) {
	return decodeBody(r, true, known)
}

// readOptionalBody is readBody for a call whose body may be left out (no
// fields).
func readOptionalBody(r *http.Request, known ...string) (map[string]json.RawMessage, error) {
	return decodeBody(r, false, known)
}

func decodeBody(r *http.Request, required bool, known []string) (map[string]json.RawMessage, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return nil, oaierror.Invalid("invalid_request", "", "The request body could not be read.")
	}
	if len(b) > maxRequestBody {
		return nil, oaierror.BodyTooLarge.With("The request body is larger than 64 KiB.", "")
	}
	var fields map[string]json.RawMessage
	if len(strings.TrimSpace(string(b))) == 0 {
		if required {
			return nil, oaierror.Invalid("invalid_request", "", "This call needs a request body: a JSON object.")
		}
		return map[string]json.RawMessage{}, nil // no body: no fields
	}
	if err := json.Unmarshal(b, &fields); err != nil || fields == nil {
		return nil, oaierror.Invalid("invalid_request", "", "The request body must be a JSON object.")
	}
	for name, raw := range fields {
		if !slices.Contains(known, name) {
			return nil, oaierror.Invalid("invalid_request", name, "Unknown field "+strconv.Quote(oaierror.Clip(name, 60))+".")
		}
		if nulEscape.Match(raw) {
			return nil, oaierror.Invalid("invalid_request", name, notText(name))
		}
	}
	return fields, nil
}

// field decodes one field of a body into v; absent fields are left alone.
func field(fields map[string]json.RawMessage, name string, v any) (bool, error) {
	raw, ok := fields[name]
	if !ok {
		return false, nil
	}
	if err := json.Unmarshal(integral(raw), v); err != nil {
		return true, oaierror.Invalid("invalid_request", name, "The field "+strconv.Quote(name)+" has the wrong type (see /api/v1/openapi.json).")
	}
	return true, nil
}

// integral writes a JSON number that is a whole number in another form
// ("60.0", "6e1") as an integer ("60"): JSON Schema's integers include
// them, and Go's decoder would refuse them for an int. Anything else,
// and numbers too long or with exponents too large to be worth the
// arithmetic, come back as they are.
func integral(raw json.RawMessage) json.RawMessage {
	t := strings.TrimSpace(string(raw))
	if len(t) == 0 || len(t) > 64 || !strings.ContainsAny(t, ".eE") || (t[0] != '-' && (t[0] < '0' || t[0] > '9')) {
		return raw
	}
	if i := strings.IndexAny(t, "eE"); i >= 0 {
		if exp, err := strconv.Atoi(strings.TrimPrefix(t[i+1:], "+")); err != nil || exp < -64 || exp > 64 {
			return raw
		}
	}
	r, ok := new(big.Rat).SetString(t)
	if !ok || !r.IsInt() {
		return raw
	}
	return json.RawMessage(r.Num().String())
}

type listJSON[T any] struct {
	Object  string `json:"object"`
	Data    []T    `json:"data"`
	HasMore bool   `json:"has_more"`
	// Next is the cursor to pass as after for the next page.
	Next *string `json:"next"`
}

func list[T any](data []T, next string) listJSON[T] {
	l := listJSON[T]{Object: "list", Data: data, HasMore: next != ""}
	if next != "" {
		l.Next = &next
	}
	return l
}

// accountOf is the account a call is about: the query's or body's
// account_id, which an account token may leave out (its own account).
func accountOf(a manage.Actor, given string) (string, error) {
	switch {
	case given != "":
		return given, nil
	case !a.Admin():
		return a.AccountID, nil
	}
	return "", oaierror.Invalid("invalid_request", "account_id", "An admin token must say which account: account_id.")
}

func limitOf(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > manage.MaxPageSize {
		return 0, oaierror.Invalid("invalid_request", "limit", "limit must be a whole number from 1 to "+strconv.Itoa(manage.MaxPageSize)+".")
	}
	return n, nil
}

func (api *API) listKeys(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	q := r.URL.Query()
	account, err := accountOf(a, q.Get("account_id"))
	if err != nil {
		return err
	}
	limit, err := limitOf(r)
	if err != nil {
		return err
	}
	page, err := api.svc.ListKeys(r.Context(), a, manage.KeyFilter{AccountID: account, Status: q.Get("status"), Text: q.Get("q"), TeamID: q.Get("team_id"), After: q.Get("after"), Limit: limit})
	if err != nil {
		return err
	}
	views := make([]manage.KeyJSON, len(page.Keys))
	for i, k := range page.Keys {
		views[i] = manage.KeyView(k, api.opt.Now())
	}
	return writeJSON(w, http.StatusOK, list(views, page.Next))
}

func (api *API) getKey(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	k, err := api.svc.GetKey(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	w.Header().Set("ETag", manage.ETag(k))
	return writeJSON(w, http.StatusOK, manage.KeyView(k, api.opt.Now()))
}

// keyFields are the editable options of a key on the wire.
var keyFields = []string{"description", "rate_limit_rpm", "tpm_limit", "tokens_per_day", "ip_restrictions", "models", "expires_at", "enabled"}

// patchOf reads a key's options from a body into a keyopts.Patch: absent
// fields are nil; rate_limit_rpm, tpm_limit and tokens_per_day null are
// Off, models null is All Models, expires_at null is never (else a date,
// YYYY-MM-DD, through its last second in UTC).
func patchOf(fields map[string]json.RawMessage) (keyopts.Patch, error) {
	var p keyopts.Patch
	var desc string
	if ok, err := field(fields, "description", &desc); err != nil {
		return p, err
	} else if ok {
		p.Description = &desc
	}
	var rpm *int
	if ok, err := field(fields, "rate_limit_rpm", &rpm); err != nil {
		return p, err
	} else if ok {
		v := "off"
		if rpm != nil {
			v = strconv.Itoa(*rpm)
		}
		p.RateLimit = &v
	}
	if err := tokenLimitFields(fields, &p); err != nil {
		return p, err
	}
	var ips []string
	if ok, err := field(fields, "ip_restrictions", &ips); err != nil {
		return p, err
	} else if ok {
		if ips == nil {
			ips = []string{}
		}
		p.IPRestrictions = &ips
	}
	var models []string
	if ok, err := field(fields, "models", &models); err != nil {
		return p, err
	} else if ok {
		p.Models = &models
	}
	var expiry *string
	if ok, err := field(fields, "expires_at", &expiry); err != nil {
		return p, err
	} else if ok {
		v := "never"
		if expiry != nil {
			v = *expiry
		}
		p.Expiry = &v
	}
	var enabled bool
	if ok, err := field(fields, "enabled", &enabled); err != nil {
		return p, err
	} else if ok {
		p.Enabled = &enabled
	}
	return p, nil
}

func (api *API) createKey(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, append([]string{"account_id"}, keyFields...)...)
	if err != nil {
		return err
	}
	var account string
	if _, err := field(fields, "account_id", &account); err != nil {
		return err
	}
	if account, err = accountOf(a, account); err != nil {
		return err
	}
	p, err := patchOf(fields)
	if err != nil {
		return err
	}
	k, secret, err := api.svc.CreateKey(r.Context(), a, account, p)
	if err != nil {
		return err
	}
	view := manage.KeyView(k, api.opt.Now())
	view.Secret = secret
	w.Header().Set("ETag", manage.ETag(k))
	w.Header().Set("Location", "/api/v1/keys/"+k.ID)
	return writeJSON(w, http.StatusCreated, view)
}

func (api *API) patchKey(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, keyFields...)
	if err != nil {
		return err
	}
	p, err := patchOf(fields)
	if err != nil {
		return err
	}
	k, err := api.svc.UpdateKey(r.Context(), a, r.PathValue("id"), r.Header.Get("If-Match"), p)
	if err != nil {
		return err
	}
	w.Header().Set("ETag", manage.ETag(k))
	return writeJSON(w, http.StatusOK, manage.KeyView(k, api.opt.Now()))
}

func (api *API) enableKey(on bool) handler {
	return func(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
		k, err := api.svc.UpdateKey(r.Context(), a, r.PathValue("id"), r.Header.Get("If-Match"), keyopts.Patch{Enabled: &on})
		if err != nil {
			return err
		}
		w.Header().Set("ETag", manage.ETag(k))
		return writeJSON(w, http.StatusOK, manage.KeyView(k, api.opt.Now()))
	}
}

func (api *API) rotateKey(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readOptionalBody(r, "grace_seconds")
	if err != nil {
		return err
	}
	var grace int64
	if _, err := field(fields, "grace_seconds", &grace); err != nil {
		return err
	}
	if grace < 0 || grace > int64(manage.MaxRotationGrace/time.Second) {
		return oaierror.Invalid("invalid_request", "grace_seconds", "grace_seconds must be from 0 to 604800 (7 days).")
	}
	k, secret, until, err := api.svc.RotateKey(r.Context(), a, r.PathValue("id"), time.Duration(grace)*time.Second)
	if err != nil {
		return err
	}
	view := manage.KeyView(k, api.opt.Now())
	view.Secret = secret
	view.PreviousSecretUntil = until
	w.Header().Set("ETag", manage.ETag(k))
	return writeJSON(w, http.StatusOK, view)
}

func (api *API) deleteKey(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("id")
	if err := api.svc.DeleteKey(r.Context(), a, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "key", "deleted": true})
}

func (api *API) listTokens(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	account := r.URL.Query().Get("account_id")
	if account == "" && !a.Admin() {
		account = a.AccountID
	}
	tokens, err := api.svc.ListTokens(r.Context(), a, account)
	if err != nil {
		return err
	}
	views := make([]manage.TokenJSON, len(tokens))
	for i, t := range tokens {
		views[i] = manage.TokenView(t)
	}
	return writeJSON(w, http.StatusOK, list(views, ""))
}

func (api *API) createToken(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "account_id", "name", "scopes", "expires_at")
	if err != nil {
		return err
	}
	var req manage.TokenRequest
	for name, v := range map[string]any{"account_id": &req.AccountID, "name": &req.Name, "scopes": &req.Scopes, "expires_at": &req.ExpiresAt} {
		if _, err := field(fields, name, v); err != nil {
			return err
		}
	}
	t, secret, err := api.svc.CreateToken(r.Context(), a, req)
	if err != nil {
		return err
	}
	view := manage.TokenView(t)
	view.Token = secret
	return writeJSON(w, http.StatusCreated, view)
}

func (api *API) revokeToken(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id := r.PathValue("id")
	if err := api.svc.RevokeToken(r.Context(), a, id); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "management_token", "deleted": true})
}

// auditJSON is an audit entry on the wire.
type auditJSON struct {
	ID        string    `json:"id"`
	Object    string    `json:"object"`
	AccountID *string   `json:"account_id"`
	Actor     string    `json:"actor"`
	Action    string    `json:"action"`
	Target    string    `json:"target"`
	Address   string    `json:"address"`
	At        time.Time `json:"at"`
	// Detail is what the action changed, when it was recorded.
	Detail *manage.AuditDetail `json:"detail,omitempty"`
	// MemberID is the person who acted, SSOSubject its single sign-on
	// subject when it signed in so; Door how it came in.
	MemberID   *string `json:"member_id"`
	SSOSubject *string `json:"sso_subject"`
	Door       *string `json:"door"`
}

func (api *API) listAudit(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	q := r.URL.Query()
	account := q.Get("account_id")
	if account == "" && !a.Admin() {
		account = a.AccountID
	}
	limit, err := limitOf(r)
	if err != nil {
		return err
	}
	f := store.AuditFilter{Action: q.Get("action"), MemberID: q.Get("member_id")}
	if q.Has("action") && !auditActionRE.MatchString(f.Action) {
		return oaierror.Invalid("invalid_request", "action", "action must be an action's name, such as key.update.")
	}
	if f.From, f.To, err = rangeOf(q); err != nil {
		return err
	}
	page, err := api.svc.ListAuditWhere(r.Context(), a, account, f, q.Get("after"), limit)
	if err != nil {
		return err
	}
	views := make([]auditJSON, len(page.Entries))
	for i, e := range page.Entries {
		views[i] = auditJSON{ID: e.ID, Object: "audit_entry", Actor: e.Actor, Action: e.Action, Target: e.Target, Address: e.Address, At: e.At,
			MemberID: manage.OrNull(e.MemberID), SSOSubject: manage.OrNull(e.SSOSubject), Door: manage.OrNull(e.Door)}
		if d, ok := manage.ParseAuditDetail(e.Detail); ok {
			views[i].Detail = &d
		}
		if e.AccountID != "" {
			id := e.AccountID
			views[i].AccountID = &id
		}
	}
	return writeJSON(w, http.StatusOK, list(views, page.Next))
}
