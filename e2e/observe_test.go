package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// logLines parses the server's JSON log, one object a line.
func (tg *tollgate) logLines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(tg.logs.String()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), "a log line that is not JSON: %s", sc.Text())
		out = append(out, m)
	}
	return out
}

// accessLine waits for the access-log line of a request.
func (tg *tollgate) accessLine(t *testing.T, requestID string) map[string]any {
	t.Helper()
	var line map[string]any
	eventually(t, func() bool {
		for _, m := range tg.logLines(t) {
			if m["msg"] == "request" && m["request_id"] == requestID {
				line = m
				return true
			}
		}
		return false
	}, "an access-log line for %s", requestID)
	return line
}

func postWithID(t *testing.T, tg *tollgate, secret, id, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, tg.BaseURL+"/chat/completions", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+secret)
	if id != "" {
		req.Header.Set("X-Request-Id", id)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// Every answer carries x-request-id — the client's, or one Tollgate makes —
// and the same id is on the usage record and the access-log line, which
// names the key and account by id and never holds a secret.
func TestRequestIDsAndTheAccessLog(t *testing.T) {
	p := newFaultProvider(t, always(faultNone))
	tg := startTollgate(t, faultConfig("30s", false, p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	resp := postWithID(t, tg, secret, "client-id-1", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "client-id-1", resp.Header.Get("X-Request-Id"), "the client's id is kept")

	line := tg.accessLine(t, "client-id-1")
	for field, want := range map[string]any{
		"key_id": keyID, "model": "m", "provider": "p0", "deployment": "m#p0/upstream-model",
		"status": float64(200), "attempts": float64(1), "prompt_tokens": float64(9), "completion_tokens": float64(2),
		"estimated": false, "level": "INFO",
	} {
		assert.Equal(t, want, line[field], field)
	}
	for _, field := range []string{"account_id", "cost_usd", "duration_ms", "ttft_ms", "time"} {
		assert.Contains(t, line, field)
	}
	assert.NotContains(t, tg.logs.String(), secret, "no secret in any log line")
	assert.NotContains(t, tg.logs.String(), "sk-openai-secret", "no provider credential in any log line")
	assert.Equal(t, "client-id-1", tg.waitDetails(t, keyID, 1)[0].RequestID, "the usage record carries the id")

	// A malformed id is replaced; a denial carries one too.
	resp = postWithID(t, tg, "tg_sk_wrong", "bad id with spaces", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.NotEmpty(t, resp.Header.Get("X-Request-Id"))
	assert.NotEqual(t, "bad id with spaces", resp.Header.Get("X-Request-Id"))
}

// A 5xx error names the request, so a user can quote it.
func TestServerErrorsNameTheRequest(t *testing.T) {
	p := newFaultProvider(t, always(faultHangHeaders))
	tg := startTollgate(t, faultConfig("30s", false, p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	resp := postWithID(t, tg, secret, "", `{"model":"m",`+faultMessages+`}`)
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	id := resp.Header.Get("X-Request-Id")
	require.NotEmpty(t, id)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), "(request id: "+id+")")
	assert.Equal(t, "WARN", tg.accessLine(t, id)["level"], "failures log at warn")
}
