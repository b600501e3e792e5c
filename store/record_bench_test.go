package store_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// BenchmarkRecordUsage is the usage recorder's write: b.N records in
// batches of one (a quiet replica) and of 20 (a busy one), on SQLite and
// on PostgreSQL, each record a request's whole record with a budget-free
// key. Its ns/op and allocs/op are per record.
//
//	go test -run '^$' -bench RecordUsage -benchmem ./store/
func BenchmarkRecordUsage(b *testing.B) {
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		for _, size := range []int{1, 20} {
			b.Run(fmt.Sprintf("%s/batch%d", db, size), func(b *testing.B) {
				s, k := benchKey(b, db)
				batch := make([]store.UsageRecord, size)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += size {
					for j := range batch {
						batch[j] = benchRecord(k, "use_"+store.OrderedID(time.Now()))
					}
					if err := s.RecordUsage(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// benchKey opens a store on db (SQLite in a file of b's, or the test
// PostgreSQL), closed when b ends, with a key of an account whose balance
// never runs out.
func benchKey(b *testing.B, db string) (store.Store, store.Key) {
	b.Helper()
	url := "sqlite://" + filepath.Join(b.TempDir(), "bench.db")
	if db == "PostgreSQL" {
		url = storetest.PostgresURL(b)
	}
	s, a := openBenchAccount(b, url)
	k, err := s.CreateKey(context.Background(), store.Key{AccountID: a.ID, Description: "k", Enabled: true, Hint: "h"}, apikey.HashOf("secret"))
	if err != nil {
		b.Fatal(err)
	}
	return s, k
}

// benchRecord is a request's whole record, of k's, with id.
func benchRecord(k store.Key, id string) store.UsageRecord {
	return store.UsageRecord{ID: id, KeyID: k.ID, AccountID: k.AccountID,
		Model: "gpt-4o-mini", Provider: "openai", PromptTokens: 120, CompletionTokens: 64,
		Cost: money.Nanos(56_400), Status: 200, Latency: 812 * time.Millisecond, RequestID: "3PNWB5X6JHQO7CYU6TN2HB3DAM",
		Deployment: "gpt-4o-mini#openai/gpt-4o-mini", Attempts: 1, TTFT: 300 * time.Millisecond, Endpoint: store.EndpointChat}
}

// openBenchAccount opens the store at url, closed when b ends, with one
// account whose balance never runs out.
func openBenchAccount(b *testing.B, url string) (store.Store, store.Account) {
	b.Helper()
	s, err := store.Open(context.Background(), url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Close)
	a, err := s.CreateAccount(context.Background(), store.Account{Email: "busy@example.com", Plan: "pro", Balance: 1 << 62})
	if err != nil {
		b.Fatal(err)
	}
	return s, a
}

// BenchmarkRecordUsageIDs is the usage write into a table already holding
// 40,000 records, in batches of 40 (a replica at about 800 requests a
// second), with the IDs the service draws (store.OrderedID: they follow
// the clock) and with IDs drawn at random, on SQLite and PostgreSQL: a
// random ID's index entry lands in a page of its own, which the batch's
// commit writes again. ns/op is per record.
//
//	go test -run '^$' -bench RecordUsageIDs ./store/
func BenchmarkRecordUsageIDs(b *testing.B) {
	for _, db := range []string{"SQLite", "PostgreSQL"} {
		for _, ids := range []string{"ordered", "random"} {
			b.Run(db+"/"+ids, func(b *testing.B) {
				s, k := benchKey(b, db)
				batch := make([]store.UsageRecord, 40)
				write := func() {
					for j := range batch {
						id := store.OrderedID(time.Now())
						if ids == "random" {
							id = rand.Text()
						}
						batch[j] = benchRecord(k, "use_"+id)
					}
					if err := s.RecordUsage(context.Background(), batch); err != nil {
						b.Fatal(err)
					}
				}
				for range 1000 {
					write()
				}
				b.ResetTimer()
				for i := 0; i < b.N; i += len(batch) {
					write()
				}
			})
		}
	}
}
