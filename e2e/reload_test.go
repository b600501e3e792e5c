package e2e

import (
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Editing the configuration file changes a running server: a model added
// to the file is served without a restart, and a broken file is refused
// while the running configuration keeps serving.
func TestConfigChangesApplyWithoutRestart(t *testing.T) {
	p := newMockOpenAI(t)
	cfg := configFor(p.URL)
	tg := startTollgate(t, cfg, "")
	secret := tg.newAccount(t, "me@example.com", "10")
	newModel := strings.Replace(helloBody, "gpt-4o-mini", "gpt-4o", 1)
	resp, _ := tg.post(t, secret, newModel)
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "gpt-4o is not configured yet")

	added := strings.Replace(cfg, "plans:\n", `  - id: gpt-4o
    max_tokens: 16384
    deployments:
      - provider: openai
        model: gpt-4o
plans:
`, 1)
	require.NoError(t, os.WriteFile(tg.Config, []byte(added), 0o600))
	eventually(t, func() bool {
		resp, _ := tg.post(t, secret, newModel)
		return resp.StatusCode == http.StatusOK
	}, "the added model is served")

	require.NoError(t, os.WriteFile(tg.Config, []byte("providers: [oops"), 0o600))
	eventually(t, func() bool { return strings.Contains(tg.logs.String(), "configuration change rejected") }, "the broken file is refused")
	resp, b := tg.post(t, secret, newModel)
	require.Equal(t, http.StatusOK, resp.StatusCode, "the running configuration keeps serving: %s", b)
}
