package manage

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// TestTextTheDatabaseCannotHoldIsTheCallersError: on PostgreSQL, whose text
// refuses NUL and bytes that are not UTF-8, a call given such a name or id
// through any door (the dashboard's forms and the CLI reach the service
// without the REST API's checks) answers 400 invalid_request, not a 500
// logged as the server's failure; and it changes nothing.
func TestTextTheDatabaseCannotHoldIsTheCallersError(t *testing.T) {
	cfg, err := config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
	require.NoError(t, err)
	st, err := store.Open(context.Background(), storetest.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(st.Close)
	svc, err := New(Options{Store: st, Config: func() *config.Config { return cfg }, WebhookKey: make([]byte, 32)})
	require.NoError(t, err)
	ctx := t.Context()
	acct, err := svc.CreateAccount(ctx, admin, "text@example.com", "pro", 0)
	require.NoError(t, err)

	for name, call := range map[string]func() error{
		"an account's email": func() error { _, err := svc.CreateAccount(ctx, admin, "a\x00b@example.com", "pro", 0); return err },
		"an account id":      func() error { _, err := svc.GetAccount(ctx, admin, "acct_\x00"); return err },
		"a key id":           func() error { _, err := svc.GetKey(ctx, admin, "key_\xff\x00"); return err },
		"a token's name": func() error {
			_, _, err := svc.CreateToken(ctx, admin, TokenRequest{AccountID: acct.ID, Name: "bot\x00", Scopes: []string{ScopeKeysRead}})
			return err
		},
	} {
		err := call()
		var e oaierror.Error
		require.ErrorAs(t, err, &e, name)
		assert.Equal(t, http.StatusBadRequest, e.Status, "%s: %v", name, err)
		assert.Equal(t, "invalid_request", e.Code, name)
	}
	_, err = svc.AccountByEmail(ctx, admin, "a\uFFFDb@example.com")
	var nf oaierror.Error
	require.ErrorAs(t, err, &nf)
	assert.Equal(t, http.StatusNotFound, nf.Status, "no account was made")
	tokens, err := st.ListTokens(ctx, acct.ID)
	require.NoError(t, err)
	assert.Empty(t, tokens, "no token was made")
}
