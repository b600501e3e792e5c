package store

import (
	"context"
	"fmt"
)

// SharedSecret returns the secret stored under name, storing candidate
// first if there is none: the first replica to ask decides, and every
// replica gets the same value.
func (s *sqlStore) SharedSecret(ctx context.Context, name string, candidate []byte) ([]byte, error) {
	if len(candidate) == 0 {
		return nil, fmt.Errorf("store: shared secret %s: empty candidate", name)
	}
	var out []byte
	err := s.db.inTx(ctx, func(q querier) error {
		if _, err := q.exec(ctx, `INSERT INTO shared_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, candidate); err != nil {
			return err
		}
		return q.queryRow(ctx, `SELECT value FROM shared_secrets WHERE name = $1`, name).Scan(&out)
	})
	if err != nil {
		return nil, fmt.Errorf("store: shared secret %s: %w", name, err)
	}
	return out, nil
}
