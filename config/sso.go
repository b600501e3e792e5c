package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// SSO is single sign-on to the dashboard with OpenID Connect providers
// (Keycloak, Okta, Microsoft Entra ID, Google Workspace, Auth0, Dex, …).
type SSO struct {
	// Providers are listed on the sign-in page, in order.
	Providers []SSOProvider `yaml:"providers"`
}

// SSOProvider is one OpenID Connect provider.
type SSOProvider struct {
	// ID names the provider in its paths (/sso/{id}/start,
	// /sso/{id}/callback): [a-z0-9-]{1,32}, unique.
	ID string `yaml:"id"`
	// DisplayName is the sign-in page's button ("Sign in with …");
	// default the id.
	DisplayName string `yaml:"display_name"`
	// Issuer is the provider's issuer URL, as its ID tokens name it and
	// under which /.well-known/openid-configuration is found.
	Issuer   string `yaml:"issuer"`
	ClientID string `yaml:"client_id"`
	// ClientSecret is the client's secret; ${VAR} expands from the
	// environment. Never logged. Empty: a public client (PKCE alone).
	ClientSecret Secret `yaml:"client_secret"`
	// Scopes asked for; openid is always asked. Default openid, email,
	// profile.
	Scopes []string `yaml:"scopes"`
	// AllowedDomains are the email domains whose people may sign in
	// through this provider; empty: any. A person of another domain is
	// refused, whether or not a member has its email.
	AllowedDomains []string `yaml:"allowed_domains"`
	// Account is the account (acct_…) a person who is no member yet joins
	// on first sign-in (just in time), with the role RoleFor gives; empty:
	// nobody joins so (only members and invitations sign in).
	Account string `yaml:"account"`
	// GroupsClaim is the ID token's claim that lists the person's groups
	// (or roles) for Roles; default "groups".
	GroupsClaim string `yaml:"groups_claim"`
	// Roles map a value of the groups claim to a role (admin, developer,
	// viewer, billing) for a member made just in time; when several
	// values match, the most powerful role wins.
	Roles map[string]string `yaml:"roles"`
	// DefaultRole is the role of a member made just in time whose groups
	// match none of Roles; default viewer.
	DefaultRole string `yaml:"default_role"`
}

// ssoRoles are the roles SSO may give, most powerful first (owners are
// made by owners, never by a provider's claim).
var ssoRoles = []string{"admin", "developer", "viewer", "billing"}

// DefaultSSOScopes are asked for when a provider lists none.
var DefaultSSOScopes = []string{"openid", "email", "profile"}

var (
	ssoID      = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)
	ssoAccount = regexp.MustCompile(`^acct_[A-Za-z0-9_]{1,64}$`)
	ssoDomain  = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`)
)

// validate checks every provider and fills its defaults.
func (s *SSO) validate() error {
	seen := map[string]bool{}
	for i := range s.Providers {
		p := &s.Providers[i]
		f := fmt.Sprintf("sso.providers[%d]", i)
		if !ssoID.MatchString(p.ID) {
			return fieldErr(f+".id", "must match [a-z0-9-]{1,32}, got %q", p.ID)
		}
		if seen[p.ID] {
			return fieldErr(f+".id", "%q is used by another provider", p.ID)
		}
		seen[p.ID] = true
		if err := p.validate(f); err != nil {
			return err
		}
	}
	return nil
}

func (p *SSOProvider) validate(f string) error {
	p.DisplayName = strings.TrimSpace(p.DisplayName)
	if p.DisplayName == "" {
		p.DisplayName = p.ID
	}
	if len(p.DisplayName) > 100 {
		return fieldErr(f+".display_name", "must be at most 100 bytes")
	}
	u, err := url.Parse(p.Issuer)
	if err != nil || (u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname()))) || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fieldErr(f+".issuer", "must be an https URL (http only on a loopback address), got %q", p.Issuer)
	}
	if strings.TrimSpace(p.ClientID) == "" {
		return fieldErr(f+".client_id", "is required")
	}
	if len(p.Scopes) == 0 {
		p.Scopes = slices.Clone(DefaultSSOScopes)
	}
	if !slices.Contains(p.Scopes, "openid") {
		p.Scopes = append([]string{"openid"}, p.Scopes...)
	}
	for j, d := range p.AllowedDomains {
		d = strings.ToLower(strings.TrimSpace(d))
		if !ssoDomain.MatchString(d) {
			return fieldErr(fmt.Sprintf("%s.allowed_domains[%d]", f, j), "must be a domain name (example.com), got %q", p.AllowedDomains[j])
		}
		p.AllowedDomains[j] = d
	}
	if p.Account != "" && !ssoAccount.MatchString(p.Account) {
		return fieldErr(f+".account", "must be an account id (acct_…), got %q", p.Account)
	}
	if p.GroupsClaim == "" {
		p.GroupsClaim = "groups"
	}
	for v, role := range p.Roles {
		if !slices.Contains(ssoRoles, role) {
			return fieldErr(f+".roles["+v+"]", "must be one of %s, got %q", strings.Join(ssoRoles, ", "), role)
		}
	}
	if p.DefaultRole == "" {
		p.DefaultRole = "viewer"
	}
	if !slices.Contains(ssoRoles, p.DefaultRole) {
		return fieldErr(f+".default_role", "must be one of %s, got %q", strings.Join(ssoRoles, ", "), p.DefaultRole)
	}
	return nil
}

// isLoopback reports whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	return host == "localhost" || host == "::1" || strings.HasPrefix(host, "127.")
}

// SSOProvider returns the provider with this id, or nil.
func (c *Config) SSOProvider(id string) *SSOProvider {
	for i := range c.SSO.Providers {
		if c.SSO.Providers[i].ID == id {
			return &c.SSO.Providers[i]
		}
	}
	return nil
}

// AllowsEmail reports whether an email's domain may sign in through the
// provider.
func (p *SSOProvider) AllowsEmail(email string) bool {
	at := strings.LastIndexByte(email, '@')
	if at < 1 || at == len(email)-1 {
		return false
	}
	if len(p.AllowedDomains) == 0 {
		return true
	}
	return slices.Contains(p.AllowedDomains, strings.ToLower(email[at+1:]))
}

// RoleFor is the role of a member made just in time with these values of
// the groups claim: the most powerful one Roles maps a value to, else
// DefaultRole.
func (p *SSOProvider) RoleFor(groups []string) string {
	best := -1
	for _, g := range groups {
		if i := slices.Index(ssoRoles, p.Roles[g]); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best < 0 {
		return p.DefaultRole
	}
	return ssoRoles[best]
}
