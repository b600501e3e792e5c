package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// How long listen waits before connecting again: listenRetryMin after a
// connection that was listening, doubling on each failure up to
// listenRetryMax.
const (
	listenRetryMin = 100 * time.Millisecond
	listenRetryMax = 10 * time.Second
)

// notify queues a NOTIFY on changesChannel; PostgreSQL sends it at commit.
func (d *postgresDB) notify(ctx context.Context, q querier, c Change) error {
	if _, err := q.exec(ctx, `SELECT pg_notify($1, $2)`, changesChannel, c.payload()); err != nil {
		return fmt.Errorf("notify %s: %w", c.payload(), err)
	}
	return nil
}

// hasFeed: changes are announced with NOTIFY.
func (d *postgresDB) hasFeed() bool { return true }

// listen LISTENs on changesChannel on a connection of its own, outside the
// pool so that it takes none of the pool's connections, and connects again
// whenever that connection fails. It returns only when ctx ends.
func (d *postgresDB) listen(ctx context.Context, fn func(Change)) error {
	wait := listenRetryMin
	for {
		listened, err := d.listenOnce(ctx, fn)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if listened {
			wait = listenRetryMin
		}
		d.log.Warn("store: listening for changes failed; retrying",
			"err", err, "retry_in", wait)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-timer.C:
		}
		wait = min(2*wait, listenRetryMax)
	}
}

// listenOnce connects, LISTENs, tells fn that anything may have changed
// (nothing was heard before this moment), then passes on each notification
// until the connection fails or ctx ends. listened reports whether LISTEN
// took effect.
func (d *postgresDB) listenOnce(ctx context.Context, fn func(Change)) (listened bool, err error) {
	conn, err := pgx.ConnectConfig(ctx, d.pool.Config().ConnConfig)
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		// A failure to say goodbye is not actionable: the connection is
		// dropped either way.
		_ = conn.Close(closeCtx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{changesChannel}.Sanitize()); err != nil {
		return false, fmt.Errorf("listen: %w", err)
	}
	fn(Change{Kind: ChangeAll})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true, fmt.Errorf("wait for notification: %w", err)
		}
		fn(parseChange(n.Payload))
	}
}
