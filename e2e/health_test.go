package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (tg *tollgate) modelIDs(t *testing.T, secret string) []string {
	t.Helper()
	resp, b := tg.do(t, http.MethodGet, "/models", secret, "")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Data []struct{ ID string } `json:"data"`
	}
	require.NoError(t, json.Unmarshal(b, &list))
	ids := []string{}
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// A deployment that keeps failing is taken out: the model disappears from
// /v1/models, and its requests get 503 at once from the router step.
func TestAFailingDeploymentLeavesTheModelList(t *testing.T) {
	t.Parallel()
	p := newMockOpenAI(t)
	p.setStatus(http.StatusInternalServerError)
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	require.True(t, slices.Contains(tg.modelIDs(t, secret), "gpt-4o-mini"))

	for i := 0; i < 3; i++ {
		resp, b := tg.post(t, secret, helloBody)
		require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.Equal(t, "no_available_workers", decodeError(t, b).Error.Code)
	}
	assert.NotContains(t, tg.modelIDs(t, secret), "gpt-4o-mini", "a model with no available deployment is not listed")
	seen := len(p.received())
	resp, b := tg.post(t, secret, helloBody)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Equal(t, "no_available_workers", decodeError(t, b).Error.Code)
	assert.Equal(t, seen, len(p.received()), "the failing provider is not called while its circuit is open")
}
