package store_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// BenchmarkKeyUsageViewAtScale is what the dashboard's usage page of the
// busiest key costs with many records on PostgreSQL: its all-time totals by
// model and its 24-hour and 30-day timelines. The records (1 million, or
// TOLLGATE_BENCH_RECORDS) are written through RecordUsage, the store's own
// write path, over 90 days, 80% of them by one key. The view reads the
// hourly rollups; "records" is the same view read from the records
// themselves (a range that is not whole hours), as every view did before
// the rollups.
//
//	go test -run '^$' -bench KeyUsageViewAtScale -benchtime 20x ./store/
func BenchmarkKeyUsageViewAtScale(b *testing.B) {
	n := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("TOLLGATE_BENCH_RECORDS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	s, a := openBenchAccount(b, storetest.PostgresURL(b))
	var keys []store.Key
	for i := range 5 {
		k, err := s.CreateKey(ctx, store.Key{AccountID: a.ID, Description: fmt.Sprint("k", i), Enabled: true, Hint: "h"}, apikey.HashOf(fmt.Sprint("secret", i)))
		if err != nil {
			b.Fatal(err)
		}
		keys = append(keys, k)
	}
	now := time.Now().UTC()
	start := now.Add(-90 * 24 * time.Hour)
	step := 90 * 24 * time.Hour / time.Duration(n)
	seedStart := time.Now()
	batch := make([]store.UsageRecord, 0, 1000)
	for i := range n {
		k := keys[0]
		if i%5 == 4 {
			k = keys[1+i%4]
		}
		batch = append(batch, store.UsageRecord{ID: fmt.Sprintf("use_%09d", i), KeyID: k.ID, AccountID: a.ID,
			Model: []string{"gpt-4o", "gpt-4o-mini", "claude-sonnet"}[i%3], Provider: "openai", PromptTokens: 100, CompletionTokens: 50,
			Cost: money.Nanos(1000 + i%7), Status: []int{200, 200, 200, 429}[i%4], CreatedAt: start.Add(time.Duration(i) * step)})
		if len(batch) == cap(batch) || i == n-1 {
			if err := s.RecordUsage(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.Logf("%d records written through RecordUsage in %v", n, time.Since(seedStart).Round(time.Second))
	busy := keys[0].ID
	day := 24 * time.Hour
	hourEnd := now.Truncate(time.Hour).Add(time.Hour)
	dayEnd := now.Truncate(day).Add(day)
	view := func(b *testing.B, shift time.Duration) {
		for b.Loop() {
			if _, err := s.UsageSummaryOf(ctx, store.UsageQuery{KeyID: busy, From: start.Truncate(time.Hour).Add(-time.Hour - shift), To: hourEnd.Add(shift)}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.KeyTimeline(ctx, busy, hourEnd.Add(-24*time.Hour-shift), hourEnd.Add(-shift), time.Hour); err != nil {
				b.Fatal(err)
			}
			if _, err := s.KeyTimeline(ctx, busy, dayEnd.Add(-30*day-shift), dayEnd.Add(-shift), day); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("rollups", func(b *testing.B) { view(b, 0) })
	b.Run("records", func(b *testing.B) { view(b, time.Microsecond) })
}
