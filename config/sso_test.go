package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const ssoKeycloak = `sso:
  providers:
    - id: keycloak
      display_name: Example SSO
      issuer: https://sso.example.com/realms/example
      client_id: tollgate
      client_secret: ${KC_SECRET}
      allowed_domains: [Example.com]
      account: acct_abc
      groups_claim: roles
      roles: {tollgate-admins: admin, tollgate-devs: developer}
      default_role: viewer
`

func TestSSOProvidersAreReadWithTheirDefaults(t *testing.T) {
	c, err := Parse([]byte(ssoKeycloak+valid), env(map[string]string{"OPENAI_API_KEY": "k", "KC_SECRET": "s3cret"}))
	require.NoError(t, err)
	p := c.SSOProvider("keycloak")
	require.NotNil(t, p)
	assert.Equal(t, "s3cret", p.ClientSecret.Reveal(), "the secret expands from the environment")
	assert.Equal(t, "[redacted]", p.ClientSecret.String())
	assert.Equal(t, []string{"openid", "email", "profile"}, p.Scopes, "the default scopes")
	assert.Equal(t, []string{"example.com"}, p.AllowedDomains, "domains in lower case")
	assert.Nil(t, c.SSOProvider("okta"))

	c, err = Parse([]byte("sso: {providers: [{id: dex, issuer: 'http://127.0.0.1:5556/dex', client_id: t, scopes: [email]}]}\n"+valid),
		env(map[string]string{"OPENAI_API_KEY": "k"}))
	require.NoError(t, err)
	p = c.SSOProvider("dex")
	assert.Equal(t, "dex", p.DisplayName, "the id is the default name")
	assert.Equal(t, []string{"openid", "email"}, p.Scopes, "openid is always asked")
	assert.Equal(t, "groups", p.GroupsClaim)
	assert.Equal(t, "viewer", p.DefaultRole)
}

func TestSSOProviderMistakesNameTheirField(t *testing.T) {
	ok := "issuer: 'https://login.example.com', client_id: t"
	for _, tc := range []struct{ yaml, field string }{
		{"{id: 'Bad ID', " + ok + "}", "sso.providers[0].id"},
		{"{id: a, " + ok + "}, {id: a, " + ok + "}", "sso.providers[1].id"},
		{"{id: a, issuer: 'http://login.example.com', client_id: t}", "sso.providers[0].issuer"},
		{"{id: a, issuer: 'https://login.example.com?x=1', client_id: t}", "sso.providers[0].issuer"},
		{"{id: a, issuer: 'https://login.example.com'}", "sso.providers[0].client_id"},
		{"{id: a, " + ok + ", allowed_domains: ['@example.com']}", "sso.providers[0].allowed_domains[0]"},
		{"{id: a, " + ok + ", account: 'bob'}", "sso.providers[0].account"},
		{"{id: a, " + ok + ", roles: {boss: owner}}", "sso.providers[0].roles[boss]"},
		{"{id: a, " + ok + ", default_role: owner}", "sso.providers[0].default_role"},
	} {
		_, err := Parse([]byte("sso: {providers: ["+tc.yaml+"]}\n"+valid), env(map[string]string{"OPENAI_API_KEY": "k"}))
		var fe *FieldError
		require.ErrorAs(t, err, &fe, tc.yaml)
		assert.Equal(t, tc.field, fe.Field, tc.yaml)
	}
}

func TestSSOClaimMappingGivesTheMostPowerfulMappedRole(t *testing.T) {
	p := SSOProvider{Roles: map[string]string{"admins": "admin", "devs": "developer", "finance": "billing"}, DefaultRole: "viewer"}
	for _, tc := range []struct {
		groups []string
		want   string
	}{
		{nil, "viewer"},
		{[]string{"marketing"}, "viewer"},
		{[]string{"devs"}, "developer"},
		{[]string{"finance", "devs"}, "developer"},
		{[]string{"devs", "admins", "finance"}, "admin"},
		{[]string{"finance"}, "billing"},
	} {
		assert.Equal(t, tc.want, p.RoleFor(tc.groups), "%v", tc.groups)
	}
}

func TestSSOAllowedDomainsMatchTheEmailsDomainOnly(t *testing.T) {
	p := SSOProvider{AllowedDomains: []string{"example.com"}}
	for email, want := range map[string]bool{
		"jane@example.com": true, "Jane@EXAMPLE.com": true, "jane@sub.example.com": false,
		"jane@example.com.evil.test": false, "jane@evil.test": false, "example.com": false, "jane@": false,
	} {
		assert.Equal(t, want, p.AllowsEmail(email), email)
	}
	assert.True(t, (&SSOProvider{}).AllowsEmail("x@any.test"), "no list: any domain")
}
