package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"

	"github.com/tollgate/tollgate/internal/testenv"
)

// schemathesisPath is where `make tools` installs schemathesis (pinned
// in requirements-dev.txt).
const schemathesisPath = "../.venv/bin/st"

// needSchemathesis returns schemathesis's path. Without it the test is
// skipped, except in CI, where it fails.
func needSchemathesis(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(schemathesisPath)
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		testenv.Need(t, "the management API's property-based test needs schemathesis at .venv/bin/st (make tools)")
	}
	return p
}

// schemathesisConfig is configFor with a management rate limit no run
// reaches, so that every generated call reaches the API's logic (the
// limit's 429 is tested in package manage).
func schemathesisConfig(providerURL string) string {
	return "limits: {management_rpm: 1000000}\n" + configFor(providerURL)
}

// TestTheManagementAPIHoldsToItsDocumentUnderGeneratedCalls runs
// schemathesis against a running tollgate serve: calls generated from
// /api/v1/openapi.json (examples, coverage, fuzzing and stateful
// sequences; a fixed seed and a bounded number of cases per operation),
// once with an admin token and once with an account token. Every check
// must pass: no 5xx, every status, header, content type and body as
// documented, bad input refused, authentication never ignored. One check
// is left out: positive_data_acceptance, which expects every input the
// schemas allow to succeed, while some rules are not the schemas' to say
// (an admin token must name the account, a cursor must be one the API
// gave, an expiry must be in the future, a plan must exist). The admin run
// leaves out revoking tokens, which would revoke its own.
func TestTheManagementAPIHoldsToItsDocumentUnderGeneratedCalls(t *testing.T) {
	st := needSchemathesis(t)
	p := newMockOpenAI(t)
	tg := startTollgate(t, schemathesisConfig(p.URL), "")
	tg.run(t, "account", "create", "--email", "team@example.com", "--plan", "pro", "--balance", "10")
	admin := strings.TrimSpace(tg.run(t, "token", "create", "--admin"))
	account := strings.TrimSpace(tg.run(t, "token", "create", "--account", "team@example.com",
		"--scope", "keys:read", "--scope", "keys:write", "--scope", "usage:read"))
	doc := strings.TrimSuffix(tg.BaseURL, "/v1") + "/api/v1/openapi.json"
	for _, run := range []struct {
		name, token string
		extra       []string
	}{
		{"admin token", admin, []string{"--exclude-operation-id", "revokeToken"}},
		{"account token", account, nil},
	} {
		t.Run(run.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			args := append([]string{"run", doc, "--header", "Authorization: Bearer " + run.token,
				"--checks", "all", "--exclude-checks", "positive_data_acceptance",
				"--max-examples", "15", "--seed", "20260615", "--workers", "2", "--request-timeout", "10",
				"--no-color"}, run.extra...)
			cmd := exec.CommandContext(ctx, st, args...)
			cmd.Env = append(os.Environ(), "SCHEMATHESIS_TELEMETRY=false")
			cmd.Dir = t.TempDir() // its cache (.schemathesis) stays out of the repository
			out, err := cmd.CombinedOutput()
			require.NoError(t, ctx.Err(), "schemathesis did not finish within 90 s:\n%s", out)
			require.NoError(t, err, "schemathesis found failures:\n%s", out)
		})
	}
	// The admin token survived its run, and the account still exists.
	status, body := tg.mgmt(t, "GET", "/api/v1/tokens", admin, "")
	require.Equal(t, 200, status, "%s", body)
	require.NotEmpty(t, gjson.GetBytes(body, "data").Array())
}
