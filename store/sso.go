package store

import (
	"context"
	"fmt"
)

// SingleSignOn is what the store keeps of single sign-on besides a
// member's pair (Member.SSOIssuer, SSOSubject) and a session's subject
// (Session.SSOSubject): whether an account requires it.
type SingleSignOn interface {
	// SSORequired reports whether the account's members sign in by single
	// sign-on only; ErrNotFound if there is no such account.
	SSORequired(ctx context.Context, accountID string) (bool, error)
	// SetSSORequired sets it; ErrNotFound if there is no such account.
	SetSSORequired(ctx context.Context, accountID string, required bool) error
}

func (s *sqlStore) SSORequired(ctx context.Context, accountID string) (bool, error) {
	var required bool
	if err := s.db.read().queryRow(ctx, `SELECT sso_required FROM accounts WHERE id = $1`, accountID).Scan(&required); err != nil {
		return false, fmt.Errorf("store: sso required: %w", err)
	}
	return required, nil
}

func (s *sqlStore) SetSSORequired(ctx context.Context, accountID string, required bool) error {
	n, err := s.db.write().exec(ctx, `UPDATE accounts SET sso_required = $2 WHERE id = $1`, accountID, required)
	if err == nil && n == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: set sso required: %w", err)
	}
	return nil
}
