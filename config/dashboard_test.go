package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDashboardSettingsAreReadAndChecked(t *testing.T) {
	lookup := env(map[string]string{"OPENAI_API_KEY": "k"})
	c, err := Parse([]byte(valid), lookup)
	require.NoError(t, err)
	assert.Equal(t, Dashboard{}, c.Dashboard, "both empty by default")

	c, err = Parse([]byte("dashboard: {public_base_url: 'https://llm.example.com/v1/', add_credit: 'https://billing.example.com/topup'}\n"+valid), lookup)
	require.NoError(t, err)
	assert.Equal(t, "https://llm.example.com/v1", c.Dashboard.PublicBaseURL, "the trailing slash is dropped")
	assert.Equal(t, "https://billing.example.com/topup", c.Dashboard.AddCreditURL())

	c, err = Parse([]byte("dashboard: {add_credit: 'Write to billing@example.com'}\n"+valid), lookup)
	require.NoError(t, err)
	assert.Equal(t, "", c.Dashboard.AddCreditURL(), "a sentence is no link")

	for _, bad := range []string{"dashboard: {public_base_url: 'llm.example.com/v1'}", "dashboard: {public_base_url: 'ftp://x/v1'}",
		"dashboard: {add_credit: '" + strings.Repeat("x", 501) + "'}"} {
		_, err := Parse([]byte(bad+"\n"+valid), lookup)
		var fe *FieldError
		require.ErrorAs(t, err, &fe, bad)
		assert.Contains(t, fe.Field, "dashboard.", bad)
	}
}
