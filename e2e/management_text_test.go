package e2e

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/store/storetest"
)

// TestTheManagementAPIRefusesTextNoDatabaseHolds: a NUL (or bytes that are
// not UTF-8) in a management call's path, query or JSON body is the
// caller's mistake, answered 400 invalid_request naming where it was, on
// either database. PostgreSQL's text refuses both, and such an id, filter
// or name answered 500 there, logged as the server's failure.
func TestTheManagementAPIRefusesTextNoDatabaseHolds(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			dsn := ""
			if db == "postgres" {
				dsn = storetest.PostgresURL(t)
			}
			tg := startTollgate(t, configFor(newMockOpenAI(t).URL), dsn)
			tg.run(t, "account", "create", "--email", "text@example.com", "--plan", "pro", "--balance", "10")
			acct := gjson.Get(tg.run(t, "account", "show", "--email", "text@example.com", "--json"), "id").String()
			admin := strings.TrimSpace(tg.run(t, "token", "create", "--admin"))
			for _, c := range []struct{ method, path, body, param string }{
				{"GET", "/api/v1/keys?account_id=a%00b", "", "account_id"},
				{"GET", "/api/v1/keys?account_id=" + acct + "&q=a%00b", "", "q"},
				{"GET", "/api/v1/keys?account_id=" + acct + "&team_id=a%ffb", "", "team_id"},
				{"GET", "/api/v1/audit?account_id=" + acct + "&member_id=a%00b", "", "member_id"},
				{"GET", "/api/v1/usage?account_id=" + acct + "&key_id=a%00b", "", "key_id"},
				{"GET", "/api/v1/keys/key_a%00b", "", ""},
				{"GET", "/api/v1/accounts/acct_a%ff%00b", "", ""},
				{"POST", "/api/v1/accounts", `{"email":"a\u0000b@example.com","plan":"pro"}`, "email"},
				{"POST", "/api/v1/tokens", `{"account_id":"` + acct + `","name":"bot \\\u0000","scopes":["keys:read"]}`, "name"},
			} {
				st, b := tg.mgmt(t, c.method, c.path, admin, c.body)
				what := c.method + " " + c.path + " " + c.body
				assert.Equal(t, http.StatusBadRequest, st, "%s: %s", what, b)
				assert.Equal(t, "invalid_request", gjson.GetBytes(b, "error.code").String(), what)
				assert.Equal(t, c.param, gjson.GetBytes(b, "error.param").String(), what)
				want := "without NUL"
				if c.param == "" && binding() == "envoy" {
					// Envoy refuses a path with %00 (or invalid UTF-8)
					// itself, in Tollgate's shape, before Tollgate sees it.
					want = "path_normalization_failed"
				}
				assert.Contains(t, gjson.GetBytes(b, "error.message").String(), want, what)
			}
			// A backslash before "u0000" is text, not a NUL: the token is made.
			st, b := tg.mgmt(t, "POST", "/api/v1/tokens", admin, `{"account_id":"`+acct+`","name":"bot \\u0000","scopes":["keys:read"]}`)
			assert.Equal(t, http.StatusCreated, st, "%s", b)
			st, b = tg.mgmt(t, "GET", "/api/v1/tokens?account_id="+acct, admin, "")
			assert.Equal(t, http.StatusOK, st, "%s", b)
			assert.Equal(t, []string{`bot \u0000`}, namesOf(b), "only that token was made")
			assert.NotContains(t, tg.logs.String(), `"level":"ERROR"`)
		})
	}
}

func namesOf(list []byte) []string {
	var out []string
	for _, n := range gjson.GetBytes(list, "data.#.name").Array() {
		out = append(out, n.String())
	}
	return out
}
