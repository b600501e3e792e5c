package store

import (
	"context"
	"strings"
)

// changesChannel is the PostgreSQL NOTIFY channel that carries changes, one
// "<kind>:<id>" payload each. Channels are database-wide, not per schema:
// Stores on other schemas of the same database hear each other's changes.
// That costs them a spurious invalidation at most, since IDs are random and
// never name anything in another schema.
const changesChannel = "tollgate_changes"

// payload is c as a notification's payload.
func (c Change) payload() string { return c.Kind + ":" + c.ID }

// parseChange reads a notification's payload. Anything it does not
// recognise (a newer version's kind, say) is taken as ChangeAll, so a
// listener never keeps something stale.
func parseChange(payload string) Change {
	kind, id, ok := strings.Cut(payload, ":")
	if !ok || id == "" || (kind != ChangeKey && kind != ChangeAccount) {
		return Change{Kind: ChangeAll}
	}
	return Change{Kind: kind, ID: id}
}

// changeTx runs fn in a transaction that also announces c, so that the
// change and its announcement commit, or roll back, together.
func (s *sqlStore) changeTx(ctx context.Context, c Change, fn func(querier) error) error {
	return s.db.inTx(ctx, func(q querier) error {
		if err := fn(q); err != nil {
			return err
		}
		return s.db.notify(ctx, q, c)
	})
}

// Subscribe calls fn for every change announced on the database; see
// Store.Subscribe.
func (s *sqlStore) Subscribe(ctx context.Context, fn func(Change)) error {
	return s.db.listen(ctx, fn)
}

// HasChangeFeed reports whether Subscribe delivers changes; see
// Store.HasChangeFeed.
func (s *sqlStore) HasChangeFeed() bool { return s.db.hasFeed() }
