package config

import (
	"net/url"
	"strings"
)

// Dashboard are the operator's settings of the dashboard's pages.
type Dashboard struct {
	// PublicBaseURL is the API's base URL as clients reach it, shown with
	// the code snippets of a new key (e.g. https://llm.example.com/v1).
	// Empty: the scheme and host the dashboard was reached at, plus /v1.
	PublicBaseURL string `yaml:"public_base_url"`
	// PublicURL is the dashboard's own base URL as people reach it (e.g.
	// https://tollgate.example.com), the start of the invitation links
	// sent by mail; required when smtp is set.
	PublicURL string `yaml:"public_url"`
	// AddCredit tells an account where to add credit: a URL (shown as a
	// link) or a sentence, shown on the Billing page and beside a balance
	// of $0 or less. Empty: "ask your administrator".
	AddCredit string `yaml:"add_credit"`
}

// maxAddCredit bounds dashboard.add_credit.
const maxAddCredit = 500

// validate refuses a base URL that is not absolute http(s) and an
// add_credit text too long to show.
func (d *Dashboard) validate() error {
	d.PublicBaseURL = strings.TrimRight(strings.TrimSpace(d.PublicBaseURL), "/")
	if d.PublicBaseURL != "" {
		u, err := url.Parse(d.PublicBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			return fieldErr("dashboard.public_base_url", "must be an absolute http(s) URL without query, got %q", d.PublicBaseURL)
		}
	}
	d.PublicURL = strings.TrimRight(strings.TrimSpace(d.PublicURL), "/")
	if d.PublicURL != "" {
		u, err := url.Parse(d.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return fieldErr("dashboard.public_url", "must be an absolute http(s) URL without query, got %q", d.PublicURL)
		}
	}
	d.AddCredit = strings.TrimSpace(d.AddCredit)
	if len(d.AddCredit) > maxAddCredit {
		return fieldErr("dashboard.add_credit", "must be at most %d bytes, got %d", maxAddCredit, len(d.AddCredit))
	}
	return nil
}

// AddCreditURL is AddCredit when it is an absolute http(s) URL, else "".
func (d Dashboard) AddCreditURL() string {
	u, err := url.Parse(d.AddCredit)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(d.AddCredit, " \t\n") {
		return ""
	}
	return d.AddCredit
}
