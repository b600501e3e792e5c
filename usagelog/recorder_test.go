package usagelog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// fakeUsageDB is a Store whose health the test sets: up, down (every
// write fails, as a lost database does), or hung (writes wait for their
// context). It keeps what it stored, by ID, as the store does.
type fakeUsageDB struct {
	mu      sync.Mutex
	down    bool
	hung    bool
	refuse  map[string]error // record IDs answered with an error for good
	stored  map[string]store.UsageRecord
	batches int
}

var errDBDown = errors.New("connection refused")

func newFakeUsageDB() *fakeUsageDB {
	return &fakeUsageDB{stored: map[string]store.UsageRecord{}, refuse: map[string]error{}}
}

func (f *fakeUsageDB) RecordUsage(ctx context.Context, recs []store.UsageRecord) error {
	f.mu.Lock()
	down, hung := f.down, f.hung
	f.mu.Unlock()
	if hung {
		<-ctx.Done()
		return ctx.Err()
	}
	if down {
		return errDBDown
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs {
		if err := f.refuse[r.ID]; err != nil {
			return err
		}
	}
	f.batches++
	for _, r := range recs {
		if _, ok := f.stored[r.ID]; !ok {
			f.stored[r.ID] = r
		}
	}
	return nil
}

func (f *fakeUsageDB) set(down, hung bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down, f.hung = down, hung
}

func (f *fakeUsageDB) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.stored)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func rec(id string) store.UsageRecord {
	return store.UsageRecord{ID: id, KeyID: "k", AccountID: "a", Model: "m", Status: 200, Cost: 1234}
}

func TestCloseWithTheDatabaseDownKeepsEveryRecordInTheJournalAndTheNextStartReplaysItOnce(t *testing.T) {
	for _, state := range []string{"down", "hung"} {
		t.Run(state, func(t *testing.T) {
			db := newFakeUsageDB()
			db.set(state == "down", state == "hung")
			journal := filepath.Join(t.TempDir(), "usage.journal")
			r := NewRecorder(db, RecorderOptions{Journal: journal, Logger: quietLogger(), Interval: time.Millisecond})
			for i := range 10 {
				require.NoError(t, r.Record(rec("use_"+string(rune('a'+i)))))
			}
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			closed := make(chan error, 1)
			go func() { closed <- r.Close(ctx) }()
			select {
			case err := <-closed:
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			case <-time.After(30 * time.Second):
				t.Fatal("Close hung with the database " + state)
			}
			assert.Zero(t, db.count())

			// The next start: the database is back.
			db.set(false, false)
			n, err := ReplayJournal(context.Background(), db, journal)
			require.NoError(t, err)
			assert.Equal(t, 10, n)
			assert.Equal(t, 10, db.count())
			_, err = os.Stat(journal)
			assert.ErrorIs(t, err, os.ErrNotExist, "a replayed journal is removed")
			n, err = ReplayJournal(context.Background(), db, journal)
			require.NoError(t, err)
			assert.Zero(t, n, "nothing is replayed twice")
		})
	}
}

func TestRecordNeverBlocksOnAFullBufferWithTheDatabaseDown(t *testing.T) {
	db := newFakeUsageDB()
	db.set(false, true)
	journal := filepath.Join(t.TempDir(), "usage.journal")
	r := NewRecorder(db, RecorderOptions{Journal: journal, Buffer: 2, Batch: 1, Logger: quietLogger()})
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		for i := range 50 {
			assert.NoError(t, r.Record(rec("use_"+strings.Repeat("x", i+1))))
		}
	}()
	select {
	case <-recorded:
	case <-time.After(30 * time.Second):
		t.Fatal("Record blocked on a full buffer")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = r.Close(ctx)
	db.set(false, false)
	n, err := ReplayJournal(context.Background(), db, journal)
	require.NoError(t, err)
	assert.Equal(t, 50, n, "every record is in the journal")
	assert.Equal(t, 50, db.count())
}

func TestARecordTheDatabaseRefusesGoesToTheDeadLetterFileOnce(t *testing.T) {
	for _, c := range []struct {
		err    error
		reason string
	}{
		{store.ErrNotFound, "no such key or account"},
		{fmt.Errorf("store: record usage: record use_bad: %w %q", store.ErrUnknownEndpoint, "images"), "unknown endpoint"},
		{fmt.Errorf("store: record usage: %w: bad byte", store.ErrInvalidText), "text the database cannot store"},
	} {
		t.Run(c.reason, func(t *testing.T) {
			db := newFakeUsageDB()
			db.refuse["use_bad"] = c.err
			journal := filepath.Join(t.TempDir(), "usage.journal")
			r := NewRecorder(db, RecorderOptions{Journal: journal, Logger: quietLogger()})
			for _, id := range []string{"use_1", "use_bad", "use_2"} {
				require.NoError(t, r.Record(rec(id)))
			}
			require.NoError(t, r.Close(context.Background()))
			assert.Equal(t, 2, db.count(), "the others are written")
			dead, err := os.ReadFile(journal + ".dead")
			require.NoError(t, err)
			assert.Equal(t, 1, strings.Count(string(dead), "\n"), "one line: %s", dead)
			assert.Contains(t, string(dead), `"ID":"use_bad"`)
			assert.Contains(t, string(dead), c.reason)
			_, err = os.Stat(journal)
			assert.ErrorIs(t, err, os.ErrNotExist, "nothing journaled: the refused record is not retried")
		})
	}
}

func TestTheJournalKeepsEveryFieldOfARecordItsEndpointIncluded(t *testing.T) {
	db := newFakeUsageDB()
	db.set(true, false)
	journal := filepath.Join(t.TempDir(), "usage.journal")
	r := NewRecorder(db, RecorderOptions{Journal: journal, Logger: quietLogger(), Interval: time.Millisecond})
	full := store.UsageRecord{ID: "use_full", KeyID: "k", AccountID: "a", Model: "text-embedding-3-small", Provider: "openai",
		PromptTokens: 11, CompletionTokens: 22, Cost: 333, Status: 502, ErrorCode: "upstream_error", ErrorMessage: "broke off",
		Latency: 1234567 * time.Microsecond, CreatedAt: time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC), Estimated: true,
		RequestID: "req-1", Deployment: "emb#openai", Attempts: 2, TTFT: 250 * time.Millisecond,
		CachedTokens: 7, CacheWriteTokens: 3, ReasoningTokens: 1, Endpoint: store.EndpointEmbeddings,
		ReservationID: "res_1", LeaseID: "lease_1", Held: 500}
	noEndpoint := rec("use_old") // as a journal written before records had one
	require.NoError(t, r.Record(full))
	require.NoError(t, r.Record(noEndpoint))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = r.Close(ctx)

	db.set(false, false)
	n, err := ReplayJournal(context.Background(), db, journal)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, full, db.stored["use_full"], "every field comes back")
	assert.Empty(t, db.stored["use_old"].Endpoint, "left for the store to write as chat")
}
