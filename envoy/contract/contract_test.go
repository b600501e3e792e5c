package contract

import (
	"strings"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// Every path's endpoint is one usage records and refusals may name.
func TestEndpointOfNamesTheStoresEndpoints(t *testing.T) {
	for path, want := range map[string]string{
		PathChatCompletions: store.EndpointChat, PathResponses: store.EndpointResponses, PathResponses + "/resp_1": store.EndpointResponses,
		PathMessages: store.EndpointMessages, PathCountTokens: store.EndpointMessages, PathEmbeddings: store.EndpointEmbeddings,
		PathCompletions: store.EndpointCompletions, PathModerations: store.EndpointModerations, PathRerank: store.EndpointRerank,
		PathModels: "", "/v1/images/generations": "", "/": "",
	} {
		assert.Equal(t, want, EndpointOf(path), path)
		if want != "" {
			assert.True(t, store.KnownEndpoint(want), want)
		}
	}
}

func TestSetHeadersOverwriteEachNameInFewAllocations(t *testing.T) {
	long := strings.Repeat("v", 600)
	for _, pairs := range [][]string{
		{"x-a", "1"},
		{"x-a", "1", "content-type", "text/event-stream"},
		{":path", "/v1/chat/completions", ":authority", "api.openai.com", "content-length", "123", "authorization", "Bearer sk-xxxxxxxx", "x-b", ""},
		{"x-a", long, "x-b", "2"},
		{"a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6", "g", "7", "h", "8", "i", "9"},
	} {
		for _, raw := range []bool{false, true} {
			got := setHeaders(raw, pairs)
			require.Len(t, got, len(pairs)/2)
			for i, o := range got {
				assert.Equal(t, pairs[2*i], o.GetHeader().GetKey())
				assert.Equal(t, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD, o.GetAppendAction())
				if raw {
					assert.Equal(t, pairs[2*i+1], string(o.GetHeader().GetRawValue()))
					assert.Empty(t, o.GetHeader().GetValue())
				} else {
					assert.Equal(t, pairs[2*i+1], o.GetHeader().GetValue())
					assert.Empty(t, o.GetHeader().GetRawValue())
				}
			}
		}
	}
	// An answer's value never shares room with the next one's.
	two := SetRawHeaders("x-a", "1", "x-b", "2")
	_ = append(two[0].GetHeader().RawValue, '!')
	assert.Equal(t, "2", string(two[1].GetHeader().GetRawValue()))

	send := []string{":path", "/v1/chat/completions", ":authority", "api.openai.com", "content-length", "123", "authorization", "Bearer sk-xxxxxxxx"}
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = SetRawHeaders(send...) }), "up to six headers of a few hundred bytes")
	assert.Equal(t, 1.0, testing.AllocsPerRun(100, func() { _ = SetRawHeaders(HeaderTranslated, "1") }))
	assert.Equal(t, 3.0, testing.AllocsPerRun(100, func() { _ = SetRawHeaders("x-a", long, "x-b", "2") }), "values past the room")
	seven := []string{"a", "1", "b", "2", "c", "3", "d", "4", "e", "5", "f", "6", "g", "7"}
	assert.Equal(t, 3.0, testing.AllocsPerRun(100, func() { _ = SetRawHeaders(seven...) }), "more headers than the room")
}

func TestAModelsClusterNamesAreMadeOnceAndStayApart(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"gpt-4o", "gpt 4o", "gpt_4o", "anthropic/claude-3.5", "anthropic_claude-3.5", "ünï", ""} {
		c, d := ClusterName(id), DirectClusterName(id)
		assert.Equal(t, clusterName(id), c, "as made")
		assert.Equal(t, DirectPrefix+strings.TrimPrefix(c, ClusterPrefix), d)
		assert.True(t, strings.HasPrefix(c, ClusterPrefix))
		for _, n := range []string{c, d} {
			other, dup := seen[n]
			assert.False(t, dup, "%q names %q and %q", n, id, other)
			seen[n] = id
		}
		assert.Equal(t, 0.0, testing.AllocsPerRun(10, func() { _, _ = ClusterName(id), DirectClusterName(id) }), "made once")
	}
}
