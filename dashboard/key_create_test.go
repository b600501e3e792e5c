package dashboard

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/keyopts"
)

var secretRE = regexp.MustCompile(`<code id="secret">([^<]+)</code>`)

func TestCreateFormShowsTheSpecsFieldsWithTheirDefaults(t *testing.T) {
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "basic", 0))
	w := b.get("/keys/new")
	require.Equal(t, http.StatusOK, w.Code)
	body := w.Body.String()
	for _, label := range []string{"Description", "Rate Limit", "IP Restrictions", "Model Access", "Expires At", "Is Enabled", "All Models", "Selected Models", "Never"} {
		assert.Contains(t, body, label)
	}
	assert.Regexp(t, `id="rate-limit-off" checked`, body)
	assert.Regexp(t, `id="model-access-all" checked`, body)
	assert.Regexp(t, `id="expires-never" checked`, body)
	assert.Regexp(t, `id="enabled" name="enabled" value="on" checked`, body)
	assert.Contains(t, body, `value="gpt-4o-mini"`, "the plan's model is offered")
	assert.NotContains(t, body, `value="o3"`, "a model outside the plan is not")
	assert.Contains(t, body, `min="2025-06-15"`)
}

func TestCreateKeyShowsTheSecretOnceAndStoresOnlyItsHash(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	w := b.post("/keys", url.Values{
		"description":     {"  production app "},
		"rate_limit":      {"custom"},
		"rate_limit_rpm":  {"60"},
		"ip_restrictions": {"10.0.0.1, 2001:DB8::/32,"},
		"model_access":    {"selected"},
		"models":          {"gpt-4o", "o3"},
		"expires":         {"date"},
		"expires_at":      {"2025-12-31"},
		"enabled":         {"on"},
	})
	require.Equal(t, http.StatusSeeOther, w.Code, "Post/Redirect/Get: %s", w.Body.String())
	assert.NotContains(t, w.Body.String(), "tt_sk_", "the POST's answer holds no secret")
	page := w.Header().Get("Location")
	assert.Regexp(t, `^/keys/key_[0-9A-Za-z]+/created$`, page)
	shown := b.get(page)
	require.Equal(t, http.StatusOK, shown.Code)
	assert.Equal(t, "no-store", shown.Header().Get("Cache-Control"))
	assert.Contains(t, shown.Body.String(), "will not be shown again")
	assert.Contains(t, shown.Body.String(), `data-copy="secret"`, "a Copy button")
	m := secretRE.FindStringSubmatch(shown.Body.String())
	require.NotNil(t, m)
	secret := m[1]
	require.NoError(t, apikey.Check("tt", secret), "the configuration's key prefix")

	// A reload shows no secret and makes no second key.
	again := b.get(page)
	require.Equal(t, http.StatusOK, again.Code)
	assert.NotContains(t, again.Body.String(), secret)
	assert.Contains(t, again.Body.String(), `id="secret-shown"`)
	assert.Len(t, e.keys(a), 1)
	// Another account's user sees nothing of it.
	assert.Equal(t, http.StatusNotFound, e.signedIn(e.account("else@example.com", "pro", 0)).get(page).Code)

	k, err := e.st.KeyByHash(context.Background(), apikey.HashOf(secret))
	require.NoError(t, err)
	assert.Equal(t, a.ID, k.AccountID)
	assert.Equal(t, "production app", k.Description)
	require.NotNil(t, k.RateLimitRPM)
	assert.Equal(t, 60, *k.RateLimitRPM)
	assert.Equal(t, []string{"10.0.0.1", "2001:db8::/32"}, k.IPRestrictions)
	assert.Equal(t, []string{"gpt-4o", "o3"}, k.Models)
	require.NotNil(t, k.ExpiresAt)
	assert.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), k.ExpiresAt.UTC(), "the end of the day in UTC")
	assert.True(t, k.Enabled)
	assert.Equal(t, apikey.Hint(secret), k.Hint)
	assert.Equal(t, []string{k.ID}, e.keysChanged())

	list := b.get("/keys").Body.String()
	assert.NotContains(t, list, secret, "the list never shows the secret")
	assert.Contains(t, list, k.Hint)
	assert.NotContains(t, e.logs.String(), secret, "the secret is never logged")
}

func TestCreateKeyWithDefaults(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	b := e.signedIn(a)
	// What was typed beside a choice that would drop it is not dropped
	// in silence: the form comes back saying so, and nothing is saved.
	w := b.post("/keys", url.Values{"description": {"ci"}, "rate_limit": {"off"}, "rate_limit_rpm": {"60"}, "model_access": {"all"}, "models": {"o3"}, "expires": {"never"}, "expires_at": {"2030-01-01"}, "enabled": {"on"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code, w.Body.String())
	body := w.Body.String()
	assert.Contains(t, body, "You typed a rate limit of 60 requests per minute, but Rate Limit is set to Off.")
	assert.Contains(t, body, "You ticked 1 model(s), but Model Access is set to All Models.")
	assert.Contains(t, body, "You picked a date (2030-01-01), but Expires At is set to Never.")
	assert.Contains(t, body, `value="60"`, "what was typed is shown again")
	assert.Contains(t, body, `id="form-errors"`)
	assert.Empty(t, e.keys(a), "nothing saved")

	w = b.post("/keys", url.Values{"description": {"ci"}, "rate_limit": {"off"}, "model_access": {"all"}, "expires": {"never"}, "enabled": {"on"}})
	require.Equal(t, http.StatusSeeOther, w.Code, w.Body.String())
	ks := e.keys(a)
	require.Len(t, ks, 1)
	k := ks[0]
	assert.Nil(t, k.RateLimitRPM)
	assert.Nil(t, k.Models)
	assert.Nil(t, k.ExpiresAt)
	assert.Empty(t, k.IPRestrictions)
	assert.True(t, k.Enabled)
}

func TestCreateKeyDisabled(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	w := e.signedIn(a).post("/keys", url.Values{"description": {"later"}})
	require.Equal(t, http.StatusSeeOther, w.Code)
	ks := e.keys(a)
	require.Len(t, ks, 1)
	assert.False(t, ks[0].Enabled, "an unticked Is Enabled box creates the key switched off")
}

func TestCreateKeyWithInvalidFieldsShowsTheFormAgainAndSavesNothing(t *testing.T) {
	valid := url.Values{"description": {"ci"}, "enabled": {"on"}}
	with := func(kv ...string) url.Values {
		v := url.Values{}
		for k, vs := range valid {
			v[k] = vs
		}
		for i := 0; i+1 < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return v
	}
	tests := []struct {
		name    string
		form    url.Values
		plan    string
		errorID string
		want    string
		kept    string
	}{
		{name: "no description", form: with("description", "   "), errorID: "description-error", want: "Enter a description."},
		{name: "long description", form: with("description", strings.Repeat("é", 201)), errorID: "description-error", want: "at most 200"},
		{name: "line break in description", form: with("description", "a\nb"), errorID: "description-error", want: "line breaks"},
		{name: "zero rpm", form: with("rate_limit", "custom", "rate_limit_rpm", "0"), errorID: "rate-limit-error", want: "at least 1", kept: `value="0"`},
		{name: "custom without a number", form: with("rate_limit", "custom"), errorID: "rate-limit-error", want: "Enter a number of requests per minute, or choose Off."},
		{name: "not a number", form: with("rate_limit", "custom", "rate_limit_rpm", "ten"), errorID: "rate-limit-error", want: `"ten" is not a whole number`},
		{name: "bad address", form: with("ip_restrictions", "10.0.0.300, 10.0.0.1"), errorID: "ip-error", want: "is not an IPv4/IPv6 address", kept: `value="10.0.0.300, 10.0.0.1"`},
		{name: "host bits", form: with("ip_restrictions", "10.0.0.1/8"), errorID: "ip-error", want: "did you mean"},
		{name: "no model selected", form: with("model_access", "selected"), errorID: "models-error", want: "Tick at least one model, or choose All Models."},
		{name: "unknown model", form: with("model_access", "selected", "models", "gpt-9"), errorID: "models-error", want: "unknown model"},
		{name: "model outside the plan", plan: "basic", form: with("model_access", "selected", "models", "o3"), errorID: "models-error", want: "not in your plan (basic)"},
		{name: "date already ended", form: with("expires", "date", "expires_at", "2025-06-14"), errorID: "expires-error", want: "has already ended", kept: `value="2025-06-14"`},
		{name: "not a date", form: with("expires", "date", "expires_at", "June"), errorID: "expires-error", want: "is not a date"},
		{name: "date chosen but not given", form: with("expires", "date"), errorID: "expires-error", want: "Pick a date, or choose Never."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			plan := tt.plan
			if plan == "" {
				plan = "pro"
			}
			a := e.account("me@example.com", plan, 0)
			w := e.signedIn(a).post("/keys", tt.form)
			require.Equal(t, http.StatusUnprocessableEntity, w.Code)
			body := w.Body.String()
			assert.Regexp(t, `id="`+tt.errorID+`">[^<]*`+regexp.QuoteMeta(htmlEscape(tt.want)), body)
			assert.Contains(t, body, "nothing was saved")
			if tt.kept != "" {
				assert.Contains(t, body, tt.kept, "the typed value is kept")
			}
			assert.NotContains(t, body, `id="secret"`)
			assert.Empty(t, e.keys(a), "nothing saved")
			assert.Empty(t, e.keysChanged())
		})
	}
}

func TestCreateFormKeepsEveryValueWhenOneIsInvalid(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	w := e.signedIn(a).post("/keys", url.Values{
		"description": {"keep <me>"}, "rate_limit": {"custom"}, "rate_limit_rpm": {"42"},
		"ip_restrictions": {"nope"}, "model_access": {"selected"}, "models": {"o3"},
		"expires": {"date"}, "expires_at": {"2026-02-03"},
	})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	body := w.Body.String()
	assert.Contains(t, body, `value="keep &lt;me&gt;"`)
	assert.Contains(t, body, `id="rate-limit-custom" checked`)
	assert.Contains(t, body, `value="42"`)
	assert.Contains(t, body, `id="model-access-selected" checked`)
	assert.Contains(t, body, `value="o3" checked`)
	assert.Contains(t, body, `id="expires-on" checked`)
	assert.Contains(t, body, `value="2026-02-03"`)
	assert.NotRegexp(t, `id="enabled" name="enabled" value="on" checked`, body)
}

// htmlEscape is how html/template writes a message's quotes.
func htmlEscape(s string) string { return strings.ReplaceAll(s, `"`, "&#34;") }

func TestFormErrorsAreSentencesThatNameTheField(t *testing.T) {
	for _, c := range []struct{ field, msg, want string }{
		{keyopts.FieldRateLimitRPM, `must be at most 1000000 requests per minute; got 2000000`, `Rate Limit must be at most 1000000 requests per minute; got 2000000.`},
		{keyopts.FieldRateLimitRPM, `"abc" is not a whole number or "off"`, `Rate Limit: "abc" is not a whole number or Off.`},
		{keyopts.FieldExpiresAt, `"2020-01-01" has already ended (dates are whole days in UTC); pick a later date or "never"`,
			`Expires At: "2020-01-01" has already ended (dates are whole days in UTC); pick a later date or Never.`},
		{keyopts.FieldIPRestrictions, `"10.0.0.1/8" has host bits set; did you mean "10.0.0.0/8"?`, `IP Restrictions: "10.0.0.1/8" has host bits set; did you mean "10.0.0.0/8"?`},
		{keyopts.FieldDescription, "is 300 characters long; at most 200 are allowed", "Description is 300 characters long; at most 200 are allowed."},
	} {
		assert.Equal(t, c.want, sentence(c.field, c.msg))
	}
	e := newEnv(t)
	b := e.signedIn(e.account("me@example.com", "pro", 0))
	w := b.post("/keys", url.Values{"description": {"ci"}, "rate_limit": {"custom"}, "rate_limit_rpm": {"0"},
		"ip_restrictions": {"10.0.0.300, example.com"}, "enabled": {"on"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	body := html.UnescapeString(w.Body.String())
	assert.Contains(t, body, "Rate Limit must be at least 1 request per minute, or choose Off; got 0.")
	assert.Contains(t, body, `IP Restrictions: "10.0.0.300" is not an IPv4/IPv6 address or CIDR; "example.com" is not an IPv4/IPv6 address or CIDR.`, "every bad entry")
}
