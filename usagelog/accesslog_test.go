package usagelog

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

type countSink struct{ n int }

func (c *countSink) Record(store.UsageRecord) error { c.n++; return nil }

func TestTheAccessLogWritesALinePerRecordAndBuildsNoneWhenItsLevelIsOff(t *testing.T) {
	rec := store.UsageRecord{RequestID: "req-1", KeyID: "key-1", Model: "m", Status: 200, Cost: 1_500_000}
	var out bytes.Buffer
	sink := &countSink{}
	on := AccessLog{Usage: sink, Logger: slog.New(slog.NewTextHandler(&out, nil))}
	require.NoError(t, on.Record(rec))
	assert.Contains(t, out.String(), "request_id=req-1")
	assert.Contains(t, out.String(), "cost_usd=0.0015")
	assert.Equal(t, 1, sink.n)

	out.Reset()
	off := AccessLog{Usage: sink, Logger: slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = off.Record(rec) }), "a line below the level costs nothing")
	assert.Empty(t, out.String())
	assert.Equal(t, 102, sink.n, "every record is passed on, logged or not")
}
