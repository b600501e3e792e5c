package mockllm

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// signedJWT is a service account's assertion, as Google's client
// libraries make it.
func signedJWT(t *testing.T, key *rsa.PrivateKey, iss string, exp time.Time) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return base64.RawURLEncoding.EncodeToString(b)
	}
	head := enc(map[string]string{"alg": "RS256", "typ": "JWT"}) + "." +
		enc(map[string]any{"iss": iss, "scope": "https://www.googleapis.com/auth/cloud-platform", "aud": "http://mock" + VertexTokenPath, "exp": exp.Unix()})
	sum := sha256.Sum256([]byte(head))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	require.NoError(t, err)
	return head + "." + base64.RawURLEncoding.EncodeToString(sig)
}

func TestVertexServesItsPathsOnlyWithATokenItIssued(t *testing.T) {
	const sa = "sa@p.iam.gserviceaccount.com"
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	m := New(Options{Record: true, Formats: []Format{Vertex}, VertexAccounts: map[string]*rsa.PublicKey{sa: &key.PublicKey}})
	grant := func(jwt string) (int, string) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {jwt}}.Encode()
		resp, body := post(t, m, VertexTokenPath, form, "Content-Type", "application/x-www-form-urlencoded")
		return resp.StatusCode, body
	}

	st, body := grant(signedJWT(t, other, sa, time.Now().Add(time.Hour)))
	assert.Equal(t, 400, st, "a JWT another key signed")
	assert.Equal(t, "invalid_grant", gjson.Get(body, "error").String())
	st, _ = grant(signedJWT(t, key, sa, time.Now().Add(-time.Minute)))
	assert.Equal(t, 400, st, "an expired JWT")
	st, body = grant(signedJWT(t, key, sa, time.Now().Add(time.Hour)))
	require.Equal(t, 200, st, body)
	token := gjson.Get(body, "access_token").String()
	require.True(t, strings.HasPrefix(token, "ya29.mock-"))

	const gemini = "/v1/projects/p/locations/global/publishers/google/models/gemini-2.5-flash:generateContent"
	const claude = "/v1/projects/p/locations/us-east5/publishers/anthropic/models/claude-haiku-4-5@20251001:rawPredict"
	geminiBody := `{"contents":[{"role":"user","parts":[{"text":"Weather in Paris?"}]}]}`
	claudeBody := `{"anthropic_version":"vertex-2023-10-16","max_tokens":50,"messages":[{"role":"user","content":"Weather in Paris?"}]}`
	tests := []struct {
		name, path, body, auth string
		status                 int
		answer                 string // a gjson path the answer has
	}{
		{"gemini", gemini, geminiBody, "Bearer " + token, 200, "candidates.0.content.parts.0.text"},
		{"claude", claude, claudeBody, "Bearer " + token, 200, "content.0.text"},
		{"no token", gemini, geminiBody, "", 401, "error.message"},
		{"a token it did not issue", claude, claudeBody, "Bearer ya29.forged", 401, "error.message"},
		{"a Claude body with a model", claude, strings.Replace(claudeBody, "{", `{"model":"claude-haiku-4-5",`, 1), "Bearer " + token, 400, "error.message"},
		{"a Claude body without Vertex's version", claude, strings.Replace(claudeBody, "vertex-2023-10-16", "2023-06-01", 1), "Bearer " + token, 400, "error.message"},
		{"a Claude body without anthropic_version", claude, strings.Replace(claudeBody, `"anthropic_version":"vertex-2023-10-16",`, "", 1), "Bearer " + token, 400, "error.message"},
		{"Gemini API's own path", "/v1beta/models/gemini-2.5-flash:generateContent", geminiBody, "Bearer " + token, 404, "error.message"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, m, tt.path, tt.body, "Authorization", tt.auth)
			assert.Equal(t, tt.status, resp.StatusCode, body)
			assert.True(t, gjson.Get(body, tt.answer).Exists(), body)
		})
	}
	assert.Equal(t, "claude-haiku-4-5@20251001", gjson.Get(func() string {
		_, b := post(t, m, claude, claudeBody, "Authorization", "Bearer "+token)
		return b
	}(), "model").String(), "Claude's answer names the path's model")
}

func TestVertexEmbeddingsAnswerPredictAsVertexDoes(t *testing.T) {
	m := New(Options{Formats: []Format{Vertex}})
	const text = "/v1/projects/p/locations/us-central1/publishers/google/models/text-embedding-005:predict"
	const gemini = "/v1/projects/p/locations/us-central1/publishers/google/models/gemini-embedding-001:predict"
	resp, body := post(t, m, text, `{"instances":[{"content":"Paris"},{"content":"Weather in Paris?","task_type":"RETRIEVAL_QUERY"}],"parameters":{"outputDimensionality":8,"autoTruncate":false}}`)
	require.Equal(t, 200, resp.StatusCode, body)
	preds := gjson.Get(body, "predictions").Array()
	require.Len(t, preds, 2)
	for i, want := range []string{"Paris", "Weather in Paris?"} {
		var got []float32
		for _, v := range preds[i].Get("embeddings.values").Array() {
			got = append(got, float32(v.Float()))
		}
		assert.Equal(t, Embedding(want, 8), got, "the mock's embedding of %q, 8 long", want)
		assert.EqualValues(t, tokens(len(want)), preds[i].Get("embeddings.statistics.token_count").Int())
		assert.False(t, preds[i].Get("embeddings.statistics.truncated").Bool())
	}
	assert.EqualValues(t, len("Paris")+len("Weather in Paris?"), gjson.Get(body, "metadata.billableCharacterCount").Int())

	many := `{"instances":[` + strings.Repeat(`{"content":"a"},`, 250) + `{"content":"a"}]}`
	for _, tt := range []struct{ name, path, body string }{
		{"no instances", text, `{"instances":[]}`},
		{"more than 250 instances", text, many},
		{"two instances for a gemini-embedding model", gemini, `{"instances":[{"content":"a"},{"content":"b"}]}`},
		{"an empty content", text, `{"instances":[{"content":""}]}`},
		{"a field Vertex does not know", text, `{"instances":[{"content":"a","model":"m"}]}`},
		{"an unknown task type", text, `{"instances":[{"content":"a","task_type":"SEARCH"}]}`},
		{"an outputDimensionality out of range", text, `{"instances":[{"content":"a"}],"parameters":{"outputDimensionality":0}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := post(t, m, tt.path, tt.body)
			assert.Equal(t, 400, resp.StatusCode, body)
			assert.Equal(t, "INVALID_ARGUMENT", gjson.Get(body, "error.status").String(), "Google's error shape: %s", body)
		})
	}
}
