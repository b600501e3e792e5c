package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

// SetPassword updates the account first (no row: ErrNotFound), then deletes
// its sessions, in one transaction.
func (s *sqlStore) SetPassword(ctx context.Context, accountID, passwordHash string) error {
	if passwordHash == "" {
		return errors.New("store: set password: empty password hash")
	}
	err := s.db.inTx(ctx, func(q querier) error {
		n, err := q.exec(ctx, `UPDATE accounts SET password_hash = $2 WHERE id = $1`, accountID, passwordHash)
		if err != nil {
			return err
		}
		if n == 0 {
			return ErrNotFound
		}
		// The account's password is its first owner's.
		if _, err := q.exec(ctx, `UPDATE members SET password_hash = $2 WHERE id = $1`, OwnerMemberID(accountID), passwordHash); err != nil {
			return fmt.Errorf("owner's password: %w", err)
		}
		if _, err := q.exec(ctx, `DELETE FROM sessions WHERE account_id = $1`, accountID); err != nil {
			return fmt.Errorf("delete sessions: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: set password: %w", err)
	}
	return nil
}

func (s *sqlStore) PasswordHash(ctx context.Context, accountID string) (string, error) {
	var hash *string
	err := s.db.read().queryRow(ctx, `SELECT password_hash FROM accounts WHERE id = $1`, accountID).Scan(&hash)
	if err == nil && hash == nil {
		err = ErrNotFound // the account has no password
	}
	if err != nil {
		return "", fmt.Errorf("store: password hash: %w", err)
	}
	return *hash, nil
}

// CreateSession relies on the foreign key for an unknown account
// (ErrNotFound) and on the primary key for a hash already stored
// (ErrConflict).
func (s *sqlStore) CreateSession(ctx context.Context, hash apikey.Hash, sess Session) error {
	created := dbTime(s.now())
	if !sess.CreatedAt.IsZero() {
		created = dbTime(sess.CreatedAt)
	}
	expires := dbTime(sess.ExpiresAt)
	if !expires.After(created) {
		return fmt.Errorf("store: create session: expiry %v is not after creation %v", expires, created)
	}
	_, err := s.db.write().exec(ctx,
		`INSERT INTO sessions (secret_hash, account_id, created_at, expires_at, member_id, sso_subject) VALUES ($1, $2, $3, $4, $5, $6)`,
		hash[:], sess.AccountID, created, expires, nullable(sess.MemberID), nullable(sess.SSOSubject))
	if err != nil {
		return fmt.Errorf("store: create session: %w", err)
	}
	return nil
}

func (s *sqlStore) SessionByHash(ctx context.Context, hash apikey.Hash, now time.Time) (Session, error) {
	var (
		sess            Session
		member, subject *string
	)
	err := s.db.read().queryRow(ctx,
		`SELECT account_id, created_at, expires_at, member_id, sso_subject FROM sessions WHERE secret_hash = $1 AND expires_at > $2`,
		hash[:], dbTime(now)).Scan(&sess.AccountID, &sess.CreatedAt, &sess.ExpiresAt, &member, &subject)
	sess.MemberID, sess.SSOSubject = deref(member), deref(subject)
	if err != nil {
		return Session{}, fmt.Errorf("store: session by hash: %w", err)
	}
	return sess, nil
}

func (s *sqlStore) DeleteSession(ctx context.Context, hash apikey.Hash) error {
	if _, err := s.db.write().exec(ctx, `DELETE FROM sessions WHERE secret_hash = $1`, hash[:]); err != nil {
		return fmt.Errorf("store: delete session: %w", err)
	}
	return nil
}

func (s *sqlStore) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	n, err := s.db.write().exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, dbTime(now))
	if err != nil {
		return 0, fmt.Errorf("store: delete expired sessions: %w", err)
	}
	return n, nil
}
