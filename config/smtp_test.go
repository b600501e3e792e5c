package config

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSMTPSettingsAreReadWithTheirDefaults(t *testing.T) {
	lookup := env(map[string]string{"OPENAI_API_KEY": "k", "SMTP_PASSWORD": "pw"})
	c, err := Parse([]byte(valid), lookup)
	require.NoError(t, err)
	assert.Nil(t, c.SMTP, "no smtp section, no mail")

	c, err = Parse([]byte("smtp: {host: mail.example.com, username: u, password: '${SMTP_PASSWORD}', from: 'Tollgate <tg@example.com>'}\n"+
		"dashboard: {public_url: 'https://tollgate.example.com/'}\n"+valid), lookup)
	require.NoError(t, err)
	require.NotNil(t, c.SMTP)
	assert.Equal(t, DefaultSMTPPort, c.SMTP.Port)
	assert.Equal(t, StartTLSAuto, c.SMTP.StartTLS)
	assert.Equal(t, "pw", c.SMTP.Password.Reveal(), "the password expands from the environment")
	assert.NotContains(t, c.SMTP.Password.String(), "pw", "and never prints itself")
	assert.Equal(t, "https://tollgate.example.com", c.Dashboard.PublicURL, "the trailing slash is dropped")
}

func TestSMTPMistakesNameTheirField(t *testing.T) {
	lookup := env(map[string]string{"OPENAI_API_KEY": "k"})
	const url = "dashboard: {public_url: 'https://tg.example.com'}\n"
	for _, tc := range []struct{ name, yaml, field string }{
		{"no host", "smtp: {from: a@example.com}\n" + url, "smtp.host"},
		{"a host with a port", "smtp: {host: 'mail:25', from: a@example.com}\n" + url, "smtp.host"},
		{"a port out of range", "smtp: {host: mail, port: 70000, from: a@example.com}\n" + url, "smtp.port"},
		{"a username without password", "smtp: {host: mail, username: u, from: a@example.com}\n" + url, "smtp.password"},
		{"no sender", "smtp: {host: mail}\n" + url, "smtp.from"},
		{"a sender with a line break", "smtp: {host: mail, from: \"a@example.com\\r\\nBcc: x@example.com\"}\n" + url, "smtp.from"},
		{"an unknown starttls", "smtp: {host: mail, from: a@example.com, starttls: maybe}\n" + url, "smtp.starttls"},
		{"no public url", "smtp: {host: mail, from: a@example.com}\n", "dashboard.public_url"},
		{"a public url without scheme", "dashboard: {public_url: 'tg.example.com'}\n", "dashboard.public_url"},
		{"a public url of ftp", "dashboard: {public_url: 'ftp://tg.example.com'}\n", "dashboard.public_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml+valid), lookup)
			var fe *FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field)
		})
	}
}
