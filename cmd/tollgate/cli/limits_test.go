package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// The CLI creates through the management service, so the account's caps
// hold there too, and it prints the service's sentence.
func TestTheCLIPrintsTheAccountsCap(t *testing.T) {
	h := newHarness(t)
	base, err := os.ReadFile(filepath.Join("testdata", "config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(cfg, append([]byte("limits: {keys_per_account: 1, tokens_per_account: 1}\n"), base...), 0o600); err != nil {
		t.Fatal(err)
	}
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--config", cfg)
	h.ok("key", "create", "--account", "a@example.com", "--description", "one", "--config", cfg)
	h.fails("This account has 1 keys, as many as it may have: delete one before creating another.",
		"key", "create", "--account", "a@example.com", "--description", "two", "--config", cfg)
	h.ok("token", "create", "--account", "a@example.com", "--name", "one", "--scope", "keys:read", "--config", cfg)
	h.fails("This account has 1 management tokens, as many as it may have: revoke one before creating another.",
		"token", "create", "--account", "a@example.com", "--name", "two", "--scope", "keys:read", "--config", cfg)
}
