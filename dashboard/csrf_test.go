package dashboard

import (
	"crypto/rand"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func randReader() io.Reader { return rand.Reader }

func TestAPostWithoutTheRightCSRFTokenChangesNothing(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)
	other := e.signedIn(a) // the same account in another browser: another token

	tests := []struct {
		name   string
		csrf   []string // nil: the right token
		header http.Header
	}{
		{name: "no token", csrf: []string{}}, // a key with no values is not sent
		{name: "empty token", csrf: []string{""}},
		{name: "wrong token", csrf: []string{"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}},
		{name: "another session's token", csrf: []string{other.csrf()}},
		{name: "right token from another site", header: http.Header{"Sec-Fetch-Site": {"cross-site"}}},
		{name: "right token, Origin of another site", header: http.Header{"Origin": {"https://evil.example"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/keys/" + k.ID + "/disable", "/keys/" + k.ID + "/delete", "/keys/" + k.ID, "/keys", "/logout"} {
				form := url.Values{"description": {"changed"}}
				if tt.csrf != nil {
					form["csrf"] = tt.csrf
				}
				w := b.postWith(path, form, tt.header)
				assert.Equal(t, http.StatusForbidden, w.Code, path)
				assert.Contains(t, w.Body.String(), "nothing was changed", path)
			}
			got := e.key(k.ID)
			assert.True(t, got.Enabled)
			assert.Equal(t, "ci", got.Description)
			assert.Len(t, e.keys(a), 1)
			assert.Equal(t, http.StatusOK, b.get("/keys").Code, "still signed in")
		})
	}
}

func TestTheCSRFTokenIsTheHMACOfTheSessionSecret(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	secret, ok := sessionSecret(cookieRequest(b.cookie))
	require.True(t, ok)
	s := &session{secret: secret}
	assert.Equal(t, s.csrfToken(), b.csrf())
	assert.True(t, s.validCSRF(b.csrf()))
	assert.False(t, s.validCSRF(b.csrf()+"x"))
}
