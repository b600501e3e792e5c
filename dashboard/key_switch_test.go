package dashboard

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/store"
)

func TestDisableAndEnableAKeyFromTheList(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)

	requireRedirect(t, b.post("/keys/"+k.ID+"/disable", nil), "/keys?saved="+k.ID)
	assert.False(t, e.key(k.ID).Enabled)
	body := b.get("/keys").Body.String()
	assert.Equal(t, "Disabled", cell(t, body, k.ID, "status"))
	assert.Contains(t, body, `action="/keys/`+k.ID+`/enable"`)

	requireRedirect(t, b.post("/keys/"+k.ID+"/enable", nil), "/keys?saved="+k.ID)
	assert.True(t, e.key(k.ID).Enabled)
	assert.Equal(t, "Enabled", cell(t, b.get("/keys").Body.String(), k.ID, "status"))
	assert.Equal(t, []string{k.ID, k.ID}, e.keysChanged())
	assert.Equal(t, "ci", e.key(k.ID).Description, "nothing else changes")
}

func TestTheDashboardsKeyActionsAreInTheAuditLog(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)
	requireRedirect(t, b.post("/keys/"+k.ID+"/disable", nil), "/keys?saved="+k.ID)
	requireRedirect(t, b.post("/keys/"+k.ID+"/enable", nil), "/keys?saved="+k.ID)
	b.post("/keys/"+k.ID+"/delete", nil)

	entries, err := e.st.ListAudit(t.Context(), a.ID, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, en := range entries {
		assert.Equal(t, "user:"+store.OwnerMemberID(a.ID), en.Actor)
		assert.Equal(t, k.ID, en.Target)
		assert.NotEmpty(t, en.Address, "the caller's address")
		got = append(got, en.Action)
	}
	assert.ElementsMatch(t, []string{"key.disable", "key.enable", "key.delete"}, got)
}
