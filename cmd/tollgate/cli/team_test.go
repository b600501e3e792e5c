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

func TestTeamMemberPutsAPersonInATeamListsAndTakesItOut(t *testing.T) {
	h := newHarness(t)
	h.newKey() // makes the account a@example.com
	id := h.obj("team", "create", "--account", "a@example.com", "--name", "crew", "--json")["id"].(string)
	out := h.ok("team", "member", "add", id, "--email", "A@example.com")
	assert.Contains(t, out, "a@example.com", "the owner, found in any case")
	assert.Contains(t, out, "owner")
	people, ok := h.json("team", "member", "list", id, "--json").([]any)
	require.True(t, ok)
	require.Len(t, people, 1)
	assert.Equal(t, "a@example.com", people[0].(map[string]any)["email"])
	h.fails("needs --email", "team", "member", "add", id)
	h.fails("No member of this account has the email", "team", "member", "add", id, "--email", "nobody@example.com")
	assert.Empty(t, h.ok("team", "member", "remove", id, "--email", "a@example.com"), "no one left")
	h.fails("a@example.com is not in team "+id, "team", "member", "remove", id, "--email", "a@example.com")
	h.fails(`no team with id "team_nope"`, "team", "member", "list", "team_nope")
}
