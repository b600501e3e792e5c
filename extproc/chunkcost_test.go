package extproc

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/envoy/contract"
)

// TestAStreamedChunkCostsNoAllocations: a chunk of a streamed answer is one
// message each way; answering it allocates nothing in the step, whether
// the chunk passes unchanged (the provider named the client's model) or is
// renamed to the client's model, and the answers still say which.
func TestAStreamedChunkCostsNoAllocations(t *testing.T) {
	tests := []struct {
		name, chunk string
		unchanged   bool
	}{
		{name: "passes unchanged", unchanged: true,
			chunk: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n"},
		{name: "renamed to the client's model",
			chunk: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[{"index":0,"delta":{"content":"Hi"}}]}` + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newRig(t)
			router, routed := g.admitted(contract.PathChatCompletions, streamBody)
			x, _ := g.attempt(routed, gpt, streamBody, 1)
			g.answer(x, "200", true)
			msg := bodyMsg(tt.chunk, false)
			resp := g.send(x, msg)
			m := resp.GetResponseBody().GetResponse().GetBodyMutation()
			if tt.unchanged {
				assert.Nil(t, m, "the chunk goes on as it came")
			} else {
				require.NotNil(t, m)
				assert.Contains(t, string(m.GetBody()), `"model":"gpt-4o-mini"`)
			}
			allocs := testing.AllocsPerRun(100, func() {
				if _, err := x.Handle(msg); err != nil {
					t.Fatal(err)
				}
			})
			assert.Zero(t, allocs, "allocations per chunk")
			g.answer(x, "200", false, chunkEnd)
			finish(x)
			g.send(router, responseHeaders(":status", "200", contract.HeaderTranslated, "1"))
			finish(router)
			all, _ := g.records()
			require.Len(t, all, 1)
			assert.Equal(t, int64(7), all[0].CompletionTokens, "the usage chunk's count, read at the end")
		})
	}
}
