package contract

import (
	"testing"

	"github.com/stretchr/testify/assert"

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
