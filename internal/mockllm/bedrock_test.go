package mockllm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var testAWS = &AWSCredentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", Region: "us-east-1"}

// bedrockRequest is a Converse request to srv, signed with secret (and
// the body changed after signing when tamper is set).
func bedrockRequest(t *testing.T, srv *httptest.Server, path, secret string, tamper bool) *http.Response {
	t.Helper()
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"Hello there"}]}],"inferenceConfig":{"maxTokens":100}}`)
	r, err := http.NewRequest(http.MethodPost, srv.URL+path, bytes.NewReader(body))
	require.NoError(t, err)
	r.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(body)
	r.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	signing := r.Clone(context.Background())
	signing.ContentLength = 0
	require.NoError(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: testAWS.AccessKeyID, SecretAccessKey: secret},
		signing, hex.EncodeToString(sum[:]), "bedrock", "us-east-1", time.Now()))
	r.Header = signing.Header
	if tamper {
		body[len(body)-3] = '9'
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	resp, err := srv.Client().Do(r)
	require.NoError(t, err)
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestBedrockSignaturesAreVerifiedWithAWSSigner(t *testing.T) {
	m := New(Options{AWS: testAWS, Record: true, Credentials: map[Format]string{OpenAI: "Bearer sk-x"}})
	srv := httptest.NewServer(m)
	defer srv.Close()
	const path = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"

	resp := bedrockRequest(t, srv, path, testAWS.SecretAccessKey, false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var whole map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&whole))
	assert.Equal(t, "end_turn", whole["stopReason"])
	assert.Equal(t, "anthropic.claude-3-5-sonnet-20240620-v1%3A0", m.Requests()[0].Path[len("/model/"):len(path)-len("/converse")])

	for name, tc := range map[string]struct {
		secret string
		tamper bool
	}{"wrong secret": {"not-the-secret", false}, "body changed after signing": {testAWS.SecretAccessKey, true}} {
		resp := bedrockRequest(t, srv, path, tc.secret, tc.tamper)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode, name)
		assert.Equal(t, "InvalidSignatureException", resp.Header.Get("X-Amzn-ErrorType"), name)
		b, _ := io.ReadAll(resp.Body)
		assert.JSONEq(t, `{"message":"`+bedrockSignatureMismatch+`"}`, string(b), name)
	}
	assert.Len(t, m.Problems(), 2)
}

func TestBedrockStreamsInEventStreamFraming(t *testing.T) {
	srv := httptest.NewServer(New(Options{AWS: testAWS, Answer: []string{"Hi", " there"}, Usage: &Usage{Prompt: 30, Completion: 7}}))
	defer srv.Close()
	resp := bedrockRequest(t, srv, "/model/amazon.nova-lite-v1%3A0/converse-stream", testAWS.SecretAccessKey, false)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, bedrockStreamType, resp.Header.Get("Content-Type"))
	dec := eventstream.NewDecoder()
	var names []string
	var text string
	var usage map[string]any
	for {
		msg, err := dec.Decode(resp.Body, nil)
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		name := msg.Headers.Get(":event-type").String()
		names = append(names, name)
		var p map[string]any
		require.NoError(t, json.Unmarshal(msg.Payload, &p))
		if d, ok := p["delta"].(map[string]any); ok {
			text += d["text"].(string)
		}
		if name == "metadata" {
			usage = p["usage"].(map[string]any)
		}
	}
	assert.Equal(t, []string{"messageStart", "contentBlockDelta", "contentBlockDelta", "contentBlockStop", "messageStop", "metadata"}, names)
	assert.Equal(t, "Hi there", text)
	assert.Equal(t, map[string]any{"inputTokens": 21.0, "cacheReadInputTokens": 6.0, "cacheWriteInputTokens": 3.0, "outputTokens": 7.0, "totalTokens": 37.0}, usage)
}
