package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

// TestTheREADMEsClaudeCodeLineAnswersOffline runs the README's Claude Code
// line as a newcomer does after `make run`: tollgate serve with
// examples/config.yaml, the account and key made by the README's
// commands, then `claude -p` with the line's variables, its base URL and
// key replaced (and its output asked for as JSON). Claude Code asks for
// its own default model, which the example's aliases give to the offline
// demo: it prints the demo's answer, and the key paid for it.
func TestTheREADMEsClaudeCodeLineAnswersOffline(t *testing.T) {
	t.Parallel()
	bin := needClaudeCode(t)
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^ANTHROPIC_BASE_URL=(\S+) ANTHROPIC_API_KEY=(\S+) claude -p "([^"]+)"$`).FindSubmatch(readme)
	require.NotNil(t, m, "the README has a Claude Code line")
	require.Equal(t, "http://127.0.0.1:8080", string(m[1]), "the line's base URL is the one `make run` serves, without /v1")
	require.Equal(t, "tg_sk_…", string(m[2]))

	cfg, err := os.ReadFile(filepath.Join("..", "examples", "config.yaml"))
	require.NoError(t, err)
	tg := startTollgate(t, string(cfg), "")
	email, secret := runREADMEsAccountCommands(t, tg, string(readme))
	base := tg.BaseURL[:len(tg.BaseURL)-len("/v1")]
	r, err := runClaude(t, bin, base, secret, "-p", string(m[3]), "--output-format", "json",
		"--no-session-persistence", "--permission-prompts", "none")
	require.NoError(t, err, "claude -p: %+v", r)
	assert.False(t, r.IsError)
	assert.Contains(t, r.Result, "This is Tollgate's demo model")

	// Claude Code makes a request for each turn of its tool calls: every
	// one recorded, to the model the aliases name, and paid.
	keyID := tg.onlyKeyID(t, email)
	var recs []usageRecord
	var paid money.Nanos
	eventually(t, func() bool {
		recs, paid = tg.usageRecords(t, keyID), 0
		for _, rec := range recs {
			paid += rec.Cost
		}
		return len(recs) > 0 && tg.balance(t, email) == 10*money.PerDollar-paid
	}, "the balance fell by what the records cost")
	for _, rec := range recs {
		assert.Equal(t, "claude-sonnet-4-5", rec.Model, "Claude Code's names are the example's aliases of claude-sonnet-4-5")
		assert.Equal(t, "demo", rec.Provider)
		assert.False(t, rec.Estimated, "the demo reports its usage")
		assert.Positive(t, int64(rec.Cost))
	}
}
