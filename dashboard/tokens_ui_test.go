package dashboard

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Issue #28, findings 7 and 8: token form errors were one line above the
// form; two tokens of one name could not be told apart; Revoke acted on one
// click and said nothing.
func TestTokenFormErrorsAreBesideTheirFields(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	w := b.post("/tokens", url.Values{"name": {"ci"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `<p class="field-error" id="token-scopes-error">Tick at least one scope.</p>`)
	assert.Contains(t, body, `aria-describedby="token-scopes-error"`)
	assert.NotContains(t, body, `id="token-name-error"`)

	w = b.post("/tokens", url.Values{"name": {""}, "scope": {"keys:read"}, "expires": {"31/01/2030"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Contains(t, w.Body.String(), `id="token-expires-error">Expires must be a date (YYYY-MM-DD).<`)
	w = b.post("/tokens", url.Values{"name": {""}, "scope": {"keys:read"}})
	assert.Contains(t, w.Body.String(), `id="token-name-error">Enter a name of 1 to 100 characters.<`)
	assert.Contains(t, w.Body.String(), `id="token-error">Some fields need attention; no token was made.<`)
}

func TestRevokingATokenAsksFirstAndSaysWhatHappened(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	for range 2 {
		require.Equal(t, http.StatusSeeOther, b.post("/tokens", url.Values{"name": {"deploy bot"}, "scope": {"keys:read"}}).Code)
	}
	list := b.get("/tokens").Body.String()
	ids := regexp.MustCompile(`<td data-field="id"><code>(mt_[0-9A-Za-z]+)</code></td>`).FindAllStringSubmatch(list, -1)
	require.Len(t, ids, 2, "two tokens of one name, told apart by their ids")
	id := ids[0][1]
	assert.Contains(t, list, `href="/tokens/`+id+`/revoke"`, "a link to a confirmation, not a one-click form")
	assert.NotContains(t, list, `action="/tokens/`+id+`/revoke"`)

	confirm := b.get("/tokens/" + id + "/revoke")
	require.Equal(t, http.StatusOK, confirm.Code)
	assert.Contains(t, confirm.Body.String(), "Revoke this token?")
	assert.Contains(t, confirm.Body.String(), id)
	assert.Contains(t, b.get("/tokens").Body.String(), id, "asking revokes nothing")

	w := b.post("/tokens/"+id+"/revoke", nil)
	requireRedirect(t, w, "/tokens?revoked="+id)
	after := b.follow(w).Body.String()
	assert.Contains(t, after, `id="flash">Token <code>`+id+`</code> revoked: it no longer works.<`)
	assert.Equal(t, 1, strings.Count(after, `<td data-field="id">`), "the other is kept")
	assert.NotContains(t, b.get("/tokens?revoked=%3Cscript%3E").Body.String(), `id="flash"`, "only a token id is named")
	assert.Equal(t, http.StatusNotFound, b.get("/tokens/"+id+"/revoke").Code, "revoked: gone")
}
