package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// vanishingKeys finds a key as many times as found allows, then no more:
// the key is deleted meanwhile, between the page's lookup of its key and
// the action it takes on it.
type vanishingKeys struct {
	store.Store
	found *atomic.Int64
}

func (v vanishingKeys) KeyByID(ctx context.Context, id string) (store.Key, error) {
	if v.found.Add(-1) < 0 {
		return store.Key{}, store.ErrNotFound
	}
	return v.Store.KeyByID(ctx, id)
}

// A key deleted while a page acts on it is the 404 page, whichever
// service call finds it gone, and nothing is logged as a failure.
func TestAKeyDeletedMeanwhileIsTheNotFoundPage(t *testing.T) {
	for _, tt := range []struct {
		method, path string
		form         url.Values
	}{
		{http.MethodPost, "/delete", nil},
		{http.MethodPost, "/rotate", url.Values{"grace": {"0"}}},
		{http.MethodPost, "/disable", nil},
		{http.MethodPost, "/enable", nil},
		{http.MethodPost, "", url.Values{"description": {"renamed"}}},
		{http.MethodGet, "/budgets", nil},
		{http.MethodPost, "/budgets", url.Values{"amount_day": {"1"}}},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			found := &atomic.Int64{}
			found.Store(1 << 30)
			e := newEnvWith(t, func(s store.Store) store.Store { return vanishingKeys{Store: s, found: found} })
			a := e.account("me@example.com", "pro", 0)
			k := e.createKey(a, "mine")
			b := e.signedIn(a)
			path := "/keys/" + k.ID + tt.path
			var code int
			if tt.method == http.MethodGet {
				found.Store(1) // the page's own lookup
				code = b.get(path).Code
			} else {
				form := withCSRF(b, tt.form)
				found.Store(1)
				code = b.post(path, form).Code
			}
			require.Equal(t, http.StatusNotFound, code)
			assert.NotContains(t, e.logs.String(), "request failed")
		})
	}
}

// withCSRF is form with the session's CSRF token, read before the test
// arms its store.
func withCSRF(b *browser, form url.Values) url.Values {
	if form == nil {
		form = url.Values{}
	}
	form.Set("csrf", b.csrf())
	return form
}

// An action on a token or a webhook endpoint that is not the visitor's is
// the 404 page, and nothing is logged as a failure.
func TestAnotherAccountsTokenOrWebhookIsTheNotFoundPage(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	for _, tt := range []struct{ method, path string }{
		{http.MethodPost, "/tokens/mt_nope/revoke"},
		{http.MethodGet, "/webhooks/whk_nope/created"},
		{http.MethodGet, "/webhooks/whk_nope/deliveries"},
		{http.MethodGet, "/webhooks/whk_nope/delete"},
		{http.MethodPost, "/webhooks/whk_nope/enable"},
		{http.MethodPost, "/webhooks/whk_nope/disable"},
		{http.MethodPost, "/webhooks/whk_nope/test"},
		{http.MethodPost, "/webhooks/whk_nope/delete"},
	} {
		var code int
		if tt.method == http.MethodGet {
			code = b.get(tt.path).Code
		} else {
			code = b.post(tt.path, nil).Code
		}
		assert.Equal(t, http.StatusNotFound, code, "%s %s", tt.method, tt.path)
	}
	assert.NotContains(t, e.logs.String(), "request failed")
}

// textlessKeys answers a key id holding a NUL as PostgreSQL does: text it
// cannot hold (the store's ErrInvalidText; the service on PostgreSQL is
// tested in package manage).
type textlessKeys struct{ store.Store }

func (v textlessKeys) KeyByID(ctx context.Context, id string) (store.Key, error) {
	if strings.ContainsRune(id, 0) {
		return store.Key{}, fmt.Errorf("store: key by id: %w: invalid byte sequence", store.ErrInvalidText)
	}
	return v.Store.KeyByID(ctx, id)
}

// A page asked for with an id the database cannot hold is the visitor's
// mistake: a 400 page saying why, nothing logged as a failure.
func TestAnIDWithANULIsABadRequestPage(t *testing.T) {
	e := newEnvWith(t, func(s store.Store) store.Store { return textlessKeys{s} })
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	for _, path := range []string{"/keys/key_%00", "/keys/key_%00/requests"} {
		w := b.get(path)
		assert.Equal(t, http.StatusBadRequest, w.Code, path)
		assert.Contains(t, w.Body.String(), "without NUL characters", path)
	}
	assert.NotContains(t, e.logs.String(), "request failed")
}
