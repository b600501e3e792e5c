package cli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestATeamIsMadeGivenKeysAndBudgetsAndDeletedOnceEmpty(t *testing.T) {
	h := newHarness(t)
	k := h.newKey("--model", "gpt-4o")
	keyID := k["id"].(string)
	team := h.obj("team", "create", "--account", "a@example.com", "--name", "research", "--model", "o3", "--json")
	id := team["id"].(string)
	assert.Equal(t, "research", team["name"])

	h.fails(`"gpt-4o" is not in the allow-list of the key's team "research"`, "team", "add", id, keyID)
	out := h.ok("team", "update", id, "--model", "o3", "--model", "gpt-4o")
	assert.Contains(t, out, "models: o3, gpt-4o")
	assert.Equal(t, "key "+keyID+" is in team "+id+"\n", h.ok("team", "add", id, keyID))
	keys, ok := h.json("key", "list", "--account", "a@example.com", "--json").([]any)
	require.True(t, ok)
	require.Len(t, keys, 1)
	assert.Equal(t, id, keys[0].(map[string]any)["team_id"], "the key shows its team")

	out = h.ok("team", "budget", "set", id, "--period", "day", "--amount", "2.5")
	assert.Regexp(t, `day\s+\$2.50\s+\$0.00`, out)
	assert.Contains(t, h.ok("team", "list", "--account", "a@example.com"), "research")
	assert.Contains(t, h.ok("team", "list", "--account", "a@example.com"), "1 keys")

	h.fails("move them out of it", "team", "delete", id)
	other := h.newKey()["id"].(string)
	h.fails("key "+other+" is not in team "+id, "team", "remove", id, other)
	assert.Equal(t, "key "+keyID+" left team "+id+"\n", h.ok("team", "remove", id, keyID))
	assert.Equal(t, "deleted team "+id+"\n", h.ok("team", "delete", id))
	h.fails(`no team with id "`+id+`"`, "team", "budget", "list", id)
	assert.Empty(t, h.ok("team", "list", "--account", "a@example.com"), "no team left")
}
