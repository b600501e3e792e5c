package refusal

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

type fakeWriter struct {
	mu      sync.Mutex
	fail    bool
	batches [][]store.RefusalCount
}

func (f *fakeWriter) AddRefusals(_ context.Context, counts []store.RefusalCount) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return errors.New("database down")
	}
	f.batches = append(f.batches, counts)
	return nil
}

func (f *fakeWriter) all() []store.RefusalCount {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []store.RefusalCount
	for _, b := range f.batches {
		out = append(out, b...)
	}
	slices.SortFunc(out, func(a, b store.RefusalCount) int { return b.Status - a.Status })
	return out
}

var at = time.Date(2026, 5, 1, 14, 35, 0, 0, time.UTC)

func TestRefusalsAreCountedInMemoryAndWrittenInOneBatch(t *testing.T) {
	w := &fakeWriter{}
	c := New(w, Options{Interval: time.Hour})
	for i := range 1000 {
		c.Count(Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 429, Code: "rate_limit_exceeded", At: at.Add(time.Duration(i) * time.Second),
			Message: "Rate limit reached."})
	}
	c.Count(Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 403, Code: "model_not_allowed", Model: "o3", At: at})
	c.Count(Refusal{Status: 401, Code: "invalid_api_key", At: at}) // no key: not counted
	assert.Empty(t, w.all(), "nothing is written per refusal")
	c.Flush(t.Context())
	hour := at.Truncate(time.Hour)
	assert.Equal(t, []store.RefusalCount{
		{KeyID: "key_1", AccountID: "acct_1", Hour: hour, Status: 429, Code: "rate_limit_exceeded", Count: 1000, Message: "Rate limit reached."},
		{KeyID: "key_1", AccountID: "acct_1", Hour: hour, Status: 403, Code: "model_not_allowed", Model: "o3", Count: 1},
	}, w.all(), "one counter per key, hour, status, code and model")
	require.Len(t, w.batches, 1)
	c.Flush(t.Context())
	assert.Len(t, w.batches, 1, "an empty flush writes nothing")
	c.Close(t.Context())
}

func TestAFailedWriteIsRetriedAndCloseWritesWhatIsLeft(t *testing.T) {
	w := &fakeWriter{fail: true}
	c := New(w, Options{Interval: time.Hour})
	c.Count(Refusal{KeyID: "key_1", Status: 402, Code: "insufficient_balance", At: at})
	c.Flush(t.Context())
	c.Count(Refusal{KeyID: "key_1", Status: 402, Code: "insufficient_balance", At: at})
	w.mu.Lock()
	w.fail = false
	w.mu.Unlock()
	c.Close(t.Context())
	got := w.all()
	require.Len(t, got, 1)
	assert.EqualValues(t, 2, got[0].Count, "the failed batch is kept and added to")
}

func TestCountersAreBoundedWhateverTheModelsAskedFor(t *testing.T) {
	w := &fakeWriter{}
	c := New(w, Options{Interval: time.Hour, MaxPending: 10})
	for i := range 100 {
		c.Count(Refusal{KeyID: "key_1", Status: 404, Code: "model_not_found", Model: strings.Repeat("m", i+1), At: at})
	}
	for i := range 30 {
		c.Count(Refusal{KeyID: "key_" + strings.Repeat("k", i), Status: 404, Code: "model_not_found", Model: "x", At: at})
	}
	c.mu.Lock()
	assert.LessOrEqual(t, len(c.pending), 20)
	assert.Positive(t, c.dropped, "past twice the bound, refusals are dropped (and logged)")
	c.mu.Unlock()
	c.Flush(t.Context())
	var other int64
	for _, r := range w.all() {
		if r.Model == OtherModel && r.KeyID == "key_1" {
			other += r.Count
		}
		assert.LessOrEqual(t, len(r.Model), MaxModel)
	}
	assert.EqualValues(t, 90, other, "the models past the bound are counted together")
	c.Close(t.Context())
}

func TestModelNamesAreKeptPrintableAndShort(t *testing.T) {
	assert.Equal(t, "gpt-4o", cleanModel("gpt-\x00\n4o"))
	assert.Equal(t, "ab", cleanModel("a\xffb"))
	assert.Len(t, cleanModel(strings.Repeat("é", 100)), MaxModel)
}
