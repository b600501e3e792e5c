package dashboard

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

func TestDeleteAsksForConfirmationThenDeletesTheKey(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	keep := e.createKey(a, "keep")
	b := e.signedIn(a)

	w := b.get("/keys/" + k.ID + "/delete")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Contains(t, w.Body.String(), "permanent")
	assert.Contains(t, w.Body.String(), `action="/keys/`+k.ID+`/delete"`)
	assert.Len(t, e.keys(a), 2, "showing the confirmation deletes nothing")

	requireRedirect(t, b.post("/keys/"+k.ID+"/delete", nil), "/keys?deleted=1")
	_, err := e.st.KeyByID(context.Background(), k.ID)
	assert.ErrorIs(t, err, store.ErrNotFound)
	ks := e.keys(a)
	require.Len(t, ks, 1)
	assert.Equal(t, keep.ID, ks[0].ID)
	assert.Equal(t, []string{k.ID}, e.keysChanged())

	body := b.get("/keys?deleted=1").Body.String()
	assert.Contains(t, body, "Key deleted.")
	assert.NotContains(t, body, k.ID)
	assert.Equal(t, http.StatusNotFound, b.post("/keys/"+k.ID+"/delete", nil).Code, "a second delete finds nothing")
	assert.Equal(t, http.StatusNotFound, b.get("/keys/"+k.ID).Code)
}
