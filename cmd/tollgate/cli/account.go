package cli

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"unicode"

	"github.com/tollgate/tollgate/store"
)

// parseEmail trims s and checks that it is a bare email address. Its case is
// kept: the store compares emails exactly.
func parseEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("email: is required")
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Name != "" || a.Address != s || len(s) > 254 {
		return "", fmt.Errorf("email: %q is not an email address", s)
	}
	return s, nil
}

// accountByEmail finds an account, saying so plainly when there is none.
func accountByEmail(ctx context.Context, s store.Store, email string) (store.Account, error) {
	email = strings.TrimSpace(email)
	a, err := s.AccountByEmail(ctx, email)
	if errors.Is(err, store.ErrNotFound) {
		return store.Account{}, fmt.Errorf("no account with email %q", email)
	}
	if err != nil {
		return store.Account{}, err
	}
	return a, nil
}

// checkPlanName checks a plan name when there is no configuration to look it
// up in: any short printable name.
func checkPlanName(p string) error {
	if p == "" {
		return errors.New("plan: is required")
	}
	if len(p) > 64 || strings.ContainsFunc(p, unicode.IsControl) {
		return fmt.Errorf("plan: %q is not a plan name", p)
	}
	return nil
}
