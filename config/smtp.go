package config

import (
	"net/mail"
	"strings"
)

// SMTP is the mail server that sends invitations.
type SMTP struct {
	// Host is the server's name (also the name its TLS certificate must
	// carry).
	Host string `yaml:"host"`
	// Port is the server's port; 0 → 587.
	Port int `yaml:"port"`
	// Username and Password sign in with AUTH PLAIN, only over TLS
	// (${VAR} expands in Password; never logged). Both or neither.
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
	// From is the sender's address (e.g. "Tollgate <tollgate@example.com>").
	From string `yaml:"from"`
	// StartTLS is auto (upgrade when the server offers it), always (refuse
	// a server that does not) or never; "" → auto.
	StartTLS string `yaml:"starttls"`
}

// The smtp.starttls values.
const (
	StartTLSAuto   = "auto"
	StartTLSAlways = "always"
	StartTLSNever  = "never"
)

// DefaultSMTPPort is smtp.port's default (mail submission).
const DefaultSMTPPort = 587

// validateSMTP checks the smtp section, fills its defaults and requires
// dashboard.public_url beside it.
func (c *Config) validateSMTP() error {
	s := c.SMTP
	if s == nil {
		return nil
	}
	s.Host = strings.TrimSpace(s.Host)
	if s.Host == "" || strings.ContainsAny(s.Host, " \t\r\n:/") {
		return fieldErr("smtp.host", "must be a host name, got %q", s.Host)
	}
	switch {
	case s.Port == 0:
		s.Port = DefaultSMTPPort
	case s.Port < 1 || s.Port > 65535:
		return fieldErr("smtp.port", "must be from 1 to 65535, got %d", s.Port)
	}
	if (s.Username == "") != (s.Password == "") {
		return fieldErr("smtp.password", "smtp.username and smtp.password go together")
	}
	if strings.ContainsAny(s.Username, "\r\n\x00") {
		return fieldErr("smtp.username", "must not contain control characters")
	}
	if a, err := mail.ParseAddress(s.From); err != nil || strings.ContainsAny(s.From, "\r\n") || a.Address == "" {
		return fieldErr("smtp.from", "must be an email address, got %q", s.From)
	}
	switch s.StartTLS {
	case "":
		s.StartTLS = StartTLSAuto
	case StartTLSAuto, StartTLSAlways, StartTLSNever:
	default:
		return fieldErr("smtp.starttls", "must be auto, always or never, got %q", s.StartTLS)
	}
	if c.Dashboard.PublicURL == "" {
		return fieldErr("dashboard.public_url", "is required when smtp is set (the invitation links start with it)")
	}
	return nil
}
