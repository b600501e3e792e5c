package refusal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/internal/testenv"
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
	c := New(w, Options{Interval: time.Hour, Model: configured})
	for i := range 1000 {
		c.Count(Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 429, Code: "rate_limit_exceeded", At: at.Add(time.Duration(i) * time.Second),
			Message: "Rate limit reached."})
	}
	c.Count(Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 403, Code: "model_not_allowed", Model: "o3", At: at})
	c.Count(Refusal{Status: 401, Code: "invalid_api_key", At: at}) // no key: not counted
	c.Count(Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 429, Code: "budget_held", Endpoint: "embeddings", At: at})
	c.Count(Refusal{KeyID: "key_1", AccountID: "acct_1", Status: 429, Code: "budget_held", Endpoint: "count_tokens", At: at}) // no endpoint of records
	assert.Empty(t, w.all(), "nothing is written per refusal")
	c.Flush(t.Context())
	hour := at.Truncate(time.Hour)
	assert.ElementsMatch(t, []store.RefusalCount{
		{KeyID: "key_1", AccountID: "acct_1", Hour: hour, Status: 429, Code: "rate_limit_exceeded", Count: 1000, Message: "Rate limit reached."},
		{KeyID: "key_1", AccountID: "acct_1", Hour: hour, Status: 403, Code: "model_not_allowed", Model: "o3", Count: 1},
		{KeyID: "key_1", AccountID: "acct_1", Hour: hour, Status: 429, Code: "budget_held", Endpoint: "embeddings", Count: 1},
		{KeyID: "key_1", AccountID: "acct_1", Hour: hour, Status: 429, Code: "budget_held", Count: 1},
	}, w.all(), "one counter per key, hour, status, code, model and endpoint (a known one, or none)")
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

// configured is Options.Model for a configuration of gpt-4o-mini (alias
// mini) and o3.
func configured(asked string) (string, bool) {
	switch asked {
	case "gpt-4o-mini", "mini":
		return "gpt-4o-mini", true
	case "o3":
		return "o3", true
	}
	return "", false
}

// TestModelsNotConfiguredShareOneCounter: a flood of distinct model names
// that name no configured model — long, binary, each new — is one counter
// (UnknownModel), never the client's text; an alias counts as its model.
func TestModelsNotConfiguredShareOneCounter(t *testing.T) {
	w := &fakeWriter{}
	c := New(w, Options{Interval: time.Hour, Model: configured})
	for i := range 500 {
		c.Count(Refusal{KeyID: "key_1", Status: 400, Code: "invalid_model", At: at,
			Model: strings.Repeat("x\x00\xff", i) + strconv.Itoa(i)})
	}
	c.Count(Refusal{KeyID: "key_1", Status: 403, Code: "model_not_allowed", Model: "mini", At: at})
	c.Count(Refusal{KeyID: "key_1", Status: 403, Code: "model_not_allowed", Model: "gpt-4o-mini", At: at})
	c.Close(t.Context())
	hour := at.Truncate(time.Hour)
	assert.Equal(t, []store.RefusalCount{
		{KeyID: "key_1", Hour: hour, Status: 403, Code: "model_not_allowed", Model: "gpt-4o-mini", Count: 2},
		{KeyID: "key_1", Hour: hour, Status: 400, Code: "invalid_model", Model: UnknownModel, Count: 500},
	}, w.all())
}

// TestAKeysHourNamesBoundedModels: with more configured models than
// store.MaxRefusalModels, the models past the bound in one key's hour share
// OtherModel; another key, or the next hour, has its own bound.
func TestAKeysHourNamesBoundedModels(t *testing.T) {
	w := &fakeWriter{}
	c := New(w, Options{Interval: time.Hour, Model: func(m string) (string, bool) { return m, true }})
	for i := range 100 {
		c.Count(Refusal{KeyID: "key_1", Status: 403, Code: "model_not_allowed", Model: "m" + strconv.Itoa(i), At: at})
	}
	c.Count(Refusal{KeyID: "key_1", Status: 403, Code: "model_not_allowed", Model: "m0", At: at})
	c.Count(Refusal{KeyID: "key_2", Status: 403, Code: "model_not_allowed", Model: "m99", At: at})
	c.Count(Refusal{KeyID: "key_1", Status: 403, Code: "model_not_allowed", Model: "m99", At: at.Add(time.Hour)})
	c.Close(t.Context())
	byModel := map[string]int64{}
	for _, r := range w.all() {
		if r.KeyID == "key_1" && r.Hour.Equal(at.Truncate(time.Hour)) {
			byModel[r.Model] += r.Count
		}
	}
	assert.Len(t, byModel, store.MaxRefusalModels+1)
	assert.EqualValues(t, 2, byModel["m0"], "a model the hour names already keeps its counter")
	assert.EqualValues(t, 100-store.MaxRefusalModels, byModel[OtherModel])
	assert.Len(t, w.all(), store.MaxRefusalModels+3)
}

// TestCountersAreBoundedWhateverTheKeys: past MaxPending counters, new
// ones share OtherModel; past twice that, refusals are dropped (and the
// drop logged).
func TestCountersAreBoundedWhateverTheKeys(t *testing.T) {
	w := &fakeWriter{}
	c := New(w, Options{Interval: time.Hour, MaxPending: 10, Model: configured})
	for i := range 30 {
		c.Count(Refusal{KeyID: "key_" + strconv.Itoa(i), Status: 403, Code: "model_not_allowed", Model: "o3", At: at})
	}
	c.mu.Lock()
	assert.Len(t, c.pending, 20)
	assert.EqualValues(t, 10, c.dropped)
	c.mu.Unlock()
	c.Flush(t.Context())
	var other int64
	for _, r := range w.all() {
		if r.Model == OtherModel {
			other += r.Count
		}
	}
	assert.EqualValues(t, 10, other, "the counters past the bound share the model")
	c.Close(t.Context())
}

// poisonWriter refuses for good any batch with a count of code "poison",
// as PostgreSQL refuses text it cannot hold; it writes the others.
type poisonWriter struct{ fakeWriter }

func (p *poisonWriter) AddRefusals(ctx context.Context, counts []store.RefusalCount) error {
	for _, c := range counts {
		if c.Code == "poison" {
			return fmt.Errorf("store: add refusals: %w: bad byte", store.ErrInvalidText)
		}
	}
	return p.fakeWriter.AddRefusals(ctx, counts)
}

// TestACountTheDatabaseRefusesForGoodHoldsBackNoOther: a counter the
// database refuses for good (a retry would be refused again) is dropped
// and logged; the counters written with it are written, and later ones
// are not held behind it.
func TestACountTheDatabaseRefusesForGoodHoldsBackNoOther(t *testing.T) {
	w := &poisonWriter{}
	var logs testenv.Buffer
	c := New(w, Options{Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c.Count(Refusal{KeyID: "key_1", Status: 402, Code: "insufficient_balance", At: at})
	c.Count(Refusal{KeyID: "key_1", Status: 400, Code: "poison", At: at})
	c.Count(Refusal{KeyID: "key_2", Status: 429, Code: "rate_limit_exceeded", At: at})
	c.Flush(t.Context())
	assert.Equal(t, []int{429, 402}, statuses(w.all()), "the others are written")
	assert.Contains(t, logs.String(), "refuses for good is dropped")
	assert.Contains(t, logs.String(), "code=poison")

	c.Count(Refusal{KeyID: "key_1", Status: 402, Code: "insufficient_balance", At: at})
	c.Flush(t.Context())
	assert.Equal(t, []int{429, 402, 402}, statuses(w.all()), "the next flush is not held back")
	c.Close(t.Context())
}

func statuses(counts []store.RefusalCount) []int {
	var out []int
	for _, c := range counts {
		out = append(out, c.Status)
	}
	return out
}
