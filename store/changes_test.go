package store_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// Notifications go to one channel for the whole database, so these tests
// hear every parallel test's changes too: they look only at the IDs they
// created themselves (and at ChangeAll).

// changeWait bounds how long a change may take to reach another store.
const changeWait = time.Second

// subscription runs s.Subscribe until the test ends and hands its changes
// to the test; done receives Subscribe's result.
type subscription struct {
	changes chan store.Change
	done    chan error
	cancel  context.CancelFunc
}

func subscribe(t *testing.T, s store.Store) *subscription {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	sub := &subscription{
		changes: make(chan store.Change, 1024),
		done:    make(chan error, 1),
		cancel:  cancel,
	}
	go func() {
		sub.done <- s.Subscribe(ctx, func(c store.Change) { sub.changes <- c })
	}()
	t.Cleanup(func() {
		cancel()
		<-sub.done
	})
	return sub
}

// next returns the next change that is ChangeAll or names one of ids,
// failing the test if none comes within changeWait.
func (sub *subscription) next(t *testing.T, ids ...string) store.Change {
	t.Helper()
	deadline := time.After(changeWait)
	for {
		select {
		case c := <-sub.changes:
			if c.Kind == store.ChangeAll {
				return c
			}
			for _, id := range ids {
				if c.ID == id {
					return c
				}
			}
		case err := <-sub.done:
			t.Fatalf("Subscribe returned early: %v", err)
		case <-deadline:
			t.Fatalf("no change for %v within %v", ids, changeWait)
		}
	}
}

// openPostgresAt opens a store on url, closed when the test ends.
func openPostgresAt(t *testing.T, url string) store.Store {
	t.Helper()
	s, err := store.Open(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(s.Close)
	return s
}

func TestChangesThroughOneStoreReachAnotherStoresSubscriber(t *testing.T) {
	url := storetest.PostgresURL(t) + "&pool_max_conns=4"
	writer := openPostgresAt(t, url)
	reader := openPostgresAt(t, url)
	sub := subscribe(t, reader)
	require.Equal(t, store.Change{Kind: store.ChangeAll}, sub.next(t), "listening starts with ChangeAll")

	ctx := t.Context()
	a, err := writer.CreateAccount(ctx, store.Account{Email: "ada@example.com", Plan: "free", Balance: money.PerDollar})
	require.NoError(t, err)
	secret, err := apikey.Generate(apikey.DefaultPrefix, rand.Reader)
	require.NoError(t, err)
	var k store.Key

	steps := []struct {
		name string
		do   func() error
		want func() store.Change
	}{
		{"credit account", func() error {
			_, err := writer.CreditAccount(ctx, a.ID, money.PerDollar)
			return err
		}, func() store.Change { return store.Change{Kind: store.ChangeAccount, ID: a.ID} }},
		{"create key", func() error {
			k, err = writer.CreateKey(ctx, store.Key{AccountID: a.ID, Description: "k", Hint: apikey.Hint(secret), Enabled: true}, apikey.HashOf(secret))
			return err
		}, func() store.Change { return store.Change{Kind: store.ChangeKey, ID: k.ID} }},
		{"update key", func() error {
			k.Enabled = false
			_, err := writer.UpdateKey(ctx, k)
			return err
		}, func() store.Change { return store.Change{Kind: store.ChangeKey, ID: k.ID} }},
		{"usage and reservations are not announced", func() error {
			// Announced changes arrive in commit order, so if these were
			// announced they would come before the credit below.
			if err := writer.Reserve(ctx, a.ID, "res_1", 100, time.Now().Add(time.Hour)); err != nil {
				return err
			}
			rec := store.UsageRecord{ID: "use_1", KeyID: k.ID, AccountID: a.ID, Model: "m", Provider: "p",
				Cost: 10, Status: 200, ReservationID: "res_1"}
			if err := writer.RecordUsage(ctx, []store.UsageRecord{rec}); err != nil {
				return err
			}
			_, err := writer.CreditAccount(ctx, a.ID, 1)
			return err
		}, func() store.Change { return store.Change{Kind: store.ChangeAccount, ID: a.ID} }},
		{"delete key", func() error {
			return writer.DeleteKey(ctx, k.ID)
		}, func() store.Change { return store.Change{Kind: store.ChangeKey, ID: k.ID} }},
	}
	for _, st := range steps {
		require.NoError(t, st.do(), st.name)
		require.Equal(t, st.want(), sub.next(t, a.ID, k.ID), st.name)
	}

	// A change that fails is rolled back, and so is its announcement.
	_, err = writer.UpdateKey(ctx, k) // deleted: ErrNotFound
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = writer.CreditAccount(ctx, a.ID, 2)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.ChangeAccount, ID: a.ID}, sub.next(t, a.ID, k.ID),
		"the failed update announced nothing")
}

func TestSubscribeReturnsWhenContextIsCancelled(t *testing.T) {
	s := openPostgresAt(t, storetest.PostgresURL(t)+"&pool_max_conns=2")
	sub := subscribe(t, s)
	require.Equal(t, store.ChangeAll, sub.next(t).Kind)

	sub.cancel()
	select {
	case err := <-sub.done:
		require.ErrorIs(t, err, context.Canceled)
		sub.done <- err // for the cleanup
	case <-time.After(changeWait):
		t.Fatal("Subscribe did not return after its context was cancelled")
	}
}

func TestSubscribeResumesWithChangeAllAfterTheConnectionDrops(t *testing.T) {
	b := make([]byte, 8)
	_, err := rand.Read(b)
	require.NoError(t, err)
	app := "tollgate_test_" + hex.EncodeToString(b)
	url := storetest.PostgresURL(t) + "&application_name=" + app
	s := openPostgresAt(t, url+"&pool_max_conns=2")
	sub := subscribe(t, s)
	require.Equal(t, store.ChangeAll, sub.next(t).Kind)

	// Kill the listening connection, as a server restart or a network
	// failure would. It is the one with this test's application_name whose
	// last statement was LISTEN.
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	defer func() { require.NoError(t, conn.Close(context.Background())) }()
	var killed int
	require.NoError(t, conn.QueryRow(t.Context(),
		`SELECT COUNT(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE application_name = $1 AND query LIKE 'LISTEN%') AS t`, app).Scan(&killed))
	require.Equal(t, 1, killed)

	require.Equal(t, store.Change{Kind: store.ChangeAll}, sub.next(t), "told that changes may have been missed")
	a, err := s.CreateAccount(t.Context(), store.Account{Email: "ada@example.com", Plan: "free"})
	require.NoError(t, err)
	_, err = s.CreditAccount(t.Context(), a.ID, 1)
	require.NoError(t, err)
	require.Equal(t, store.Change{Kind: store.ChangeAccount, ID: a.ID}, sub.next(t, a.ID), "listening again")
}

func TestSubscribeOnSQLiteIsUnsupported(t *testing.T) {
	s, err := store.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "tollgate.db"))
	require.NoError(t, err)
	defer s.Close()
	called := false
	err = s.Subscribe(t.Context(), func(store.Change) { called = true })
	require.True(t, errors.Is(err, store.ErrNotifyUnsupported), "got %v", err)
	require.False(t, called)
}

// HasChangeFeed answers, without subscribing, what Subscribe would do:
// deliver changes on PostgreSQL, return ErrNotifyUnsupported on SQLite.
func TestHasChangeFeedSaysWhetherSubscribeDeliversChanges(t *testing.T) {
	lite, err := store.Open(t.Context(), "sqlite://"+filepath.Join(t.TempDir(), "tollgate.db"))
	require.NoError(t, err)
	defer lite.Close()
	require.False(t, lite.HasChangeFeed(), "SQLite")
	pg, err := store.Open(t.Context(), storetest.PostgresURL(t))
	require.NoError(t, err)
	defer pg.Close()
	require.True(t, pg.HasChangeFeed(), "PostgreSQL")
}
