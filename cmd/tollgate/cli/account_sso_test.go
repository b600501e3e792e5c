package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// account sso switches "SSO required": on only with a provider in
// --config, off always (the operator's way back in), audited as the CLI.
func TestAccountSSOSwitchesSSORequired(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	base, err := os.ReadFile(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfg, append(base, []byte("\nsso: {providers: [{id: corp, issuer: 'https://idp.example.com', client_id: tg}]}\n")...), 0o600))

	h.fails("No single sign-on provider is configured", "account", "sso", "--email", "a@example.com", "--required", "on")
	h.fails("--required must be on or off", "account", "sso", "--email", "a@example.com", "--required", "yes")
	assert.Equal(t, "single sign-on required: on\n", h.ok("account", "sso", "--email", "a@example.com", "--required", "on", "--config", cfg))

	st := h.store()
	a, err := st.AccountByEmail(context.Background(), "a@example.com")
	require.NoError(t, err)
	on, err := st.SSORequired(context.Background(), a.ID)
	require.NoError(t, err)
	assert.True(t, on)

	h.ok("account", "sso", "--email", "a@example.com", "--required", "off")
	on, err = st.SSORequired(context.Background(), a.ID)
	require.NoError(t, err)
	assert.False(t, on, "off needs no provider")
}
