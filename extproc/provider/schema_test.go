package provider

import (
	"flag"
	"github.com/tollgate/tollgate/extproc/provider/schematest"

	"bytes"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/extproc/sse"
)

// Components of OpenAI's schema the answers must conform to.
const (
	schemaCompletion = schematest.Completion
	schemaChunk      = schematest.Chunk
	schemaError      = schematest.Error
	schemaModelList  = schematest.ModelList
)

// TestMain starts loading the spec at once, so that the load (a second, or
// several under -race) overlaps with the tests that do not need it.
func TestMain(m *testing.M) {
	// Load OpenAI's schema while the first tests run — unless only
	// benchmarks run (-run '^$'), which it would slow down.
	flag.Parse()
	if f := flag.Lookup("test.run"); f == nil || f.Value.String() != "^$" {
		go func() { _, _ = schematest.Schemas() }()
	}
	os.Exit(m.Run())
}

// requireSchema checks a JSON body against a component of OpenAI's schema.
func requireSchema(t testing.TB, component string, body []byte) {
	t.Helper()
	schematest.Require(t, component, body)
}

// requireStreamSchema checks every event of a client stream: chunks against
// CreateChatCompletionStreamResponse, error events against ErrorResponse.
// The stream must end with exactly one end: [DONE] when the answer is whole,
// or one error event (and no [DONE]) when it broke off; nothing may follow.
func requireStreamSchema(t testing.TB, stream []byte) {
	t.Helper()
	var p sse.Parser
	p.Feed(stream)
	ended := ""
	for {
		ev, ok := p.Next()
		if !ok {
			break
		}
		require.Empty(t, ended, "an event after the stream's end (%s): %q", ended, ev.Raw)
		data := ev.Data
		if string(data) == "[DONE]" {
			ended = "[DONE]"
			continue
		}
		if bytes.HasPrefix(data, []byte(`{"error"`)) {
			requireSchema(t, schemaError, data)
			ended = "an error event"
			continue
		}
		requireSchema(t, schemaChunk, data)
	}
	require.Zero(t, p.Pending(), "an unfinished event at the end: %q", stream)
	require.NotEmpty(t, ended, "the stream ends neither with [DONE] nor with an error event")
}
