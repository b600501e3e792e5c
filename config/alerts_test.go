package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTheAlertsSectionHasDefaultsAndBounds(t *testing.T) {
	vars := env(map[string]string{"OPENAI_API_KEY": "sk-test", "ALERTS_KEY": "0123456789abcdef0123456789abcdef"})
	c, err := Parse([]byte(valid), vars)
	require.NoError(t, err)
	require.Equal(t, DefaultFirstRetry, c.Alerts.FirstRetry.D())
	require.False(t, c.Alerts.AllowPrivateAddresses)

	c, err = Parse([]byte(valid+"alerts:\n  allow_private_addresses: true\n  first_retry: 200ms\n  secret_key: ${ALERTS_KEY}\n"), vars)
	require.NoError(t, err)
	require.True(t, c.Alerts.AllowPrivateAddresses)
	require.Equal(t, 200*time.Millisecond, c.Alerts.FirstRetry.D())
	require.Equal(t, "0123456789abcdef0123456789abcdef", c.Alerts.SecretKey.Reveal())

	for section, field := range map[string]string{
		"alerts:\n  first_retry: 10ms\n": "alerts.first_retry",
		"alerts:\n  first_retry: 2h\n":   "alerts.first_retry",
		"alerts:\n  secret_key: short\n": "alerts.secret_key",
	} {
		_, err := Parse([]byte(valid+section), vars)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, section)
		require.Equal(t, field, fe.Field)
	}
}
