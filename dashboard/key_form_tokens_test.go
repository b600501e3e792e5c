package dashboard

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The key form's token limits: saved as typed, empty is Off, an invalid
// number comes back beside its field and saves nothing, and the edit
// form shows what is saved.
func TestTheKeyFormSetsTokenLimits(t *testing.T) {
	e := newEnv(t)
	a := e.account("me@example.com", "pro", 0)
	k := e.createKey(a, "ci")
	b := e.signedIn(a)

	w := b.post("/keys/"+k.ID, url.Values{"description": {"ci"}, "tpm_limit": {"0"}, "tokens_per_day": {"5000000"}, "enabled": {"on"}})
	require.Equal(t, http.StatusUnprocessableEntity, w.Code)
	assert.Contains(t, w.Body.String(), "Tokens per Minute")
	assert.Contains(t, w.Body.String(), `id="tpm-error"`)
	assert.Nil(t, e.key(k.ID).TokensPerDay, "nothing saved")

	w = b.post("/keys/"+k.ID, url.Values{"description": {"ci"}, "tpm_limit": {"40000"}, "tokens_per_day": {""}, "enabled": {"on"}})
	requireRedirect(t, w, "/keys?saved="+k.ID)
	got := e.key(k.ID)
	require.NotNil(t, got.TPMLimit)
	assert.Equal(t, int64(40000), *got.TPMLimit)
	assert.Nil(t, got.TokensPerDay, "empty is Off")

	form := b.get("/keys/" + k.ID + "/edit").Body.String()
	assert.Contains(t, form, `name="tpm_limit" min="1" max="1000000000000" step="1" inputmode="numeric" value="40000"`)
}
