package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// Stopping `tollgate serve` lets a stream under way finish, then writes its
// usage before the process ends.
func TestShutdownDrainsStreamsAndFlushesUsage(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	p := newMockOpenAI(t, holding(hold, nil))
	tg := startTollgate(t, configFor(p.URL), "")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	stream := tg.client(secret).Chat.Completions.NewStreaming(context.Background(), chatParams())
	require.True(t, stream.Next(), "the stream has begun")

	stopped := make(chan struct{})
	go func() { tg.stop(); close(stopped) }()
	// Once the server is draining, it cannot stop before the held stream
	// ends: nothing but the stream's end lets it.
	eventually(t, func() bool { return strings.Contains(tg.logs.String(), "shutting down") }, "the server is draining")
	select {
	case <-stopped:
		t.Fatal("the server stopped with a stream still running")
	default:
	}
	close(hold)

	var text strings.Builder
	text.WriteString(stream.Current().Choices[0].Delta.Content)
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	require.NoError(t, stream.Err())
	assert.Equal(t, "Hello from the mock.", text.String(), "the stream ran to its end")
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not stop after the stream ended")
	}

	// The process is gone; its usage record is in the database.
	st, err := store.Open(context.Background(), tg.DB)
	require.NoError(t, err)
	defer st.Close()
	u, err := st.KeyUsage(context.Background(), keyID)
	require.NoError(t, err)
	assert.Equal(t, int64(1), u.TotalRequests)
	assert.Equal(t, mockCost, u.Cost)
}

// A stream that outlasts --drain-timeout is ended with an error event (no
// [DONE]) and still recorded, as a provider failure billed for what it
// produced.
func TestShutdownEndsStreamsPastTheDrainTimeoutAndStillRecordsThem(t *testing.T) {
	t.Parallel()
	arrived := make(chan string, 1)
	p := newFaultProvider(t, always(faultHangAfter), arriving(arrived))
	tg := startTollgate(t, strings.Replace(faultConfig("10m", false, p.URL), "stream_idle_timeout: 400ms", "stream_idle_timeout: 5m", 1), "",
		"--drain-timeout", "300ms")
	secret := tg.newAccount(t, "me@example.com", "10")
	keyID := tg.onlyKeyID(t, "me@example.com")

	resp := tg.postRaw(t, secret, `{"model":"m","stream":true,`+faultMessages+`}`)
	require.Equal(t, 200, resp.StatusCode)
	<-arrived
	ended := make(chan string, 1)
	go func() {
		end, _ := streamEnd(t, resp.Body)
		ended <- end
	}()
	tg.stop()
	select {
	case end := <-ended:
		assert.Equal(t, "error:upstream_error", end, "one error event, no [DONE]")
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end at shutdown")
	}

	st, err := store.Open(context.Background(), tg.DB)
	require.NoError(t, err)
	defer st.Close()
	recs, err := st.UsageRecords(context.Background(), keyID, 10)
	require.NoError(t, err)
	require.Len(t, recs, 1, "the stream cut at shutdown is recorded")
	assert.Equal(t, 502, recs[0].Status)
	assert.Positive(t, recs[0].CompletionTokens, "what was produced is billed")
}
