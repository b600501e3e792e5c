package extproc

import (
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/stretchr/testify/assert"
)

// TestOnlyAllowedAnswerHeadersReachTheClient: the provider's cookies,
// identity, rate limits and server stay at the proxy; the body's type and
// the framing are left alone.
func TestOnlyAllowedAnswerHeadersReachTheClient(t *testing.T) {
	var hs []*corev3.HeaderValue
	for _, name := range []string{":status", "content-type", "date", "transfer-encoding", "content-length", "x-request-id",
		"set-cookie", "openai-organization", "openai-project", "x-ratelimit-remaining-requests", "x-ratelimit-limit-tokens",
		"server", "openai-processing-ms", "x-tollgate-translated"} {
		hs = append(hs, &corev3.HeaderValue{Key: name, RawValue: []byte("v")})
	}
	assert.ElementsMatch(t, []string{"content-length", "x-request-id", "set-cookie", "openai-organization", "openai-project",
		"x-ratelimit-remaining-requests", "x-ratelimit-limit-tokens", "server", "openai-processing-ms"},
		notPassedBack(&corev3.HeaderMap{Headers: hs}))
}
