package config

import "time"

// Defaults of the alerts section.
const (
	DefaultFirstRetry = 30 * time.Second
	// MinAlertsSecretKey is the shortest alerts.secret_key accepted.
	MinAlertsSecretKey = 32
)

// Alerts configure the webhook deliveries of alerts (package alerts).
type Alerts struct {
	// AllowPrivateAddresses lets webhooks reach private, loopback and
	// link-local addresses, and use http: for tests and development only.
	AllowPrivateAddresses bool `yaml:"allow_private_addresses"`
	// SecretKey seals the endpoints' signing secrets in the database
	// (at least 32 characters; use ${ENV}). Empty: a key generated once
	// and kept in the database, so a copy of the database alone opens
	// them. Changing it makes the stored secrets unusable.
	SecretKey Secret `yaml:"secret_key"`
	// CAFile is a PEM file of authorities trusted for endpoints besides
	// the system's (read when the server starts).
	CAFile string `yaml:"ca_file"`
	// FirstRetry is the wait before a failed delivery's first retry; each
	// next one doubles it, up to an hour. Default 30s.
	FirstRetry Duration `yaml:"first_retry"`
}

// validate fills the defaults and refuses what cannot work.
func (a *Alerts) validate() error {
	switch {
	case a.FirstRetry == 0:
		a.FirstRetry = Duration(DefaultFirstRetry)
	case a.FirstRetry < Duration(100*time.Millisecond) || a.FirstRetry > Duration(time.Hour):
		return fieldErr("alerts.first_retry", "must be between 100ms and 1h, got %s", a.FirstRetry.D())
	}
	if n := len(a.SecretKey); n > 0 && n < MinAlertsSecretKey {
		return fieldErr("alerts.secret_key", "must be at least %d characters, got %d", MinAlertsSecretKey, n)
	}
	return nil
}
