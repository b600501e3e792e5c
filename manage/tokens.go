package manage

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// TokenRequest is a new management token's options.
type TokenRequest struct {
	// AccountID is the account the token acts for; "" makes an admin token.
	AccountID string
	// Name says what the token is for (1–100 characters).
	Name string
	// Scopes of an account token: at least one of AllScopes. An admin token
	// has every scope, whatever is asked.
	Scopes []string
	// ExpiresAt is nil for never; it must be in the future.
	ExpiresAt *time.Time
}

// canManageTokens: tokens are managed by an admin token, the CLI, or the
// account's signed-in user (the dashboard); an account token cannot make
// or revoke tokens, so a leaked one cannot mint more.
func (a Actor) canManageTokens(accountID string) error {
	switch {
	case a.Admin():
		return nil
	case a.Kind == ActorUser && a.AccountID == accountID:
		if !a.may(OpTokensOwn) {
			return ErrPermission
		}
		return nil
	case a.Kind == ActorUser:
		return ErrNotFound
	}
	return ErrAdminOnly.With("Management tokens are made and revoked by an admin token, the CLI, or the account's user in the dashboard.", "")
}

// CreateToken makes a management token and returns it with its secret,
// shown this once.
func (s *Service) CreateToken(ctx context.Context, a Actor, r TokenRequest) (store.ManagementToken, string, error) {
	if err := a.canManageTokens(r.AccountID); err != nil {
		return store.ManagementToken{}, "", err
	}
	r.Name = strings.TrimSpace(r.Name)
	if n := len([]rune(r.Name)); n < 1 || n > 100 {
		return store.ManagementToken{}, "", oaierror.Invalid("invalid_request", "name", "name must be 1 to 100 characters.")
	}
	scopes := slices.Clone(AllScopes)
	if r.AccountID != "" {
		if _, err := s.account(ctx, a, r.AccountID, OpTokensOwn); err != nil {
			return store.ManagementToken{}, "", err
		}
		if len(r.Scopes) == 0 {
			return store.ManagementToken{}, "", oaierror.Invalid("invalid_request", "scopes", "scopes must name at least one of "+strings.Join(AllScopes, ", ")+".")
		}
		scopes = nil
		for _, sc := range r.Scopes {
			if !slices.Contains(AllScopes, sc) {
				return store.ManagementToken{}, "", oaierror.Invalid("invalid_request", "scopes", fmt.Sprintf("%q is not a scope: use %s.", oaierror.Clip(sc, 40), strings.Join(AllScopes, ", ")))
			}
			if a.Role != "" && !roleHasScope(a.Role, sc) {
				return store.ManagementToken{}, "", ErrPermission.With(fmt.Sprintf("A token cannot do more than the %s who makes it: %s is beyond the role.", a.Role, sc), "scopes")
			}
			if !slices.Contains(scopes, sc) {
				scopes = append(scopes, sc)
			}
		}
		slices.Sort(scopes)
	}
	if r.ExpiresAt != nil && !r.ExpiresAt.After(s.opt.Now()) {
		return store.ManagementToken{}, "", oaierror.Invalid("invalid_request", "expires_at", "expires_at must be in the future.")
	}
	secret, err := apikey.GenerateToken(s.opt.Random)
	if err != nil {
		return store.ManagementToken{}, "", s.fail(ctx, "token secret", err)
	}
	most := Limits(s.opt.Config()).TokensPerAccount
	t, err := s.opt.Store.CreateTokenWithin(ctx, store.ManagementToken{AccountID: r.AccountID, Name: r.Name, Scopes: scopes,
		Hint: apikey.TokenHint(secret), ExpiresAt: r.ExpiresAt, CreatedBy: a.MemberID}, apikey.HashOf(secret), most)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.ManagementToken{}, "", ErrNotFound
	case errors.Is(err, store.ErrLimit):
		return store.ManagementToken{}, "", ErrTokenLimit.With(fmt.Sprintf("This account has %d management tokens, as many as it may have: revoke one before creating another.", most), "")
	case err != nil:
		return store.ManagementToken{}, "", s.fail(ctx, "create token", err)
	}
	s.auditWith(ctx, a, r.AccountID, ActionTokenCreate, t.ID, AuditDetail{Name: t.Name,
		Changes: map[string][2]string{"scopes": {"", strings.Join(t.Scopes, ", ")}}})
	return t, secret, nil
}

// ListTokens lists an account's live tokens ("" for the admin tokens, which
// only an admin sees): every one with tokens.all, else the actor's own.
func (s *Service) ListTokens(ctx context.Context, a Actor, accountID string) ([]store.ManagementToken, error) {
	if accountID == "" && !a.Admin() {
		return nil, ErrAdminOnly
	}
	if accountID != "" {
		if _, err := s.account(ctx, a, accountID, OpTokensOwn); err != nil {
			return nil, err
		}
		if !a.can(ScopeKeysRead) {
			return nil, ErrScope
		}
	}
	tokens, err := s.opt.Store.ListTokens(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "list tokens", err)
	}
	if !a.may(OpTokensAll) {
		tokens = slices.DeleteFunc(tokens, func(t store.ManagementToken) bool { return t.CreatedBy != a.MemberID })
	}
	return tokens, nil
}

// RevokeToken ends a token at once.
func (s *Service) RevokeToken(ctx context.Context, a Actor, id string) error {
	t, err := s.opt.Store.TokenByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "token lookup", err)
	}
	if !a.Admin() && t.AccountID != a.AccountID {
		return ErrNotFound
	}
	if err := a.canManageTokens(t.AccountID); err != nil {
		return err
	}
	if !a.may(OpTokensAll) && t.CreatedBy != a.MemberID {
		return ErrPermission
	}
	switch err := s.opt.Store.RevokeToken(ctx, id); {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "revoke token", err)
	}
	s.auditWith(ctx, a, t.AccountID, ActionTokenRevoke, id, AuditDetail{Name: t.Name})
	return nil
}

// AuditPage is one page of an account's audit log, newest first; Next is
// the cursor of the next page, "" on the last.
type AuditPage struct {
	Entries []store.AuditEntry
	Next    string
}

// ListAudit lists an account's audit log ("" for the entries about no
// account, admin only). after is the cursor of the previous page.
func (s *Service) ListAudit(ctx context.Context, a Actor, accountID, after string, limit int) (AuditPage, error) {
	return s.ListAuditWhere(ctx, a, accountID, store.AuditFilter{}, after, limit)
}

// ListAuditWhere is ListAudit of the entries f selects (one action, a
// range of times).
func (s *Service) ListAuditWhere(ctx context.Context, a Actor, accountID string, f store.AuditFilter, after string, limit int) (AuditPage, error) {
	if accountID == "" && !a.Admin() {
		return AuditPage{}, ErrAdminOnly
	}
	if accountID != "" {
		if _, err := s.account(ctx, a, accountID, OpAuditRead); err != nil {
			return AuditPage{}, err
		}
	}
	switch {
	case limit == 0:
		limit = DefaultPageSize
	case limit < 1 || limit > MaxPageSize:
		return AuditPage{}, oaierror.Invalid("invalid_request", "limit", fmt.Sprintf("limit must be from 1 to %d.", MaxPageSize))
	}
	var before *store.AuditEntry
	if after != "" {
		at, id, ok := decodeCursor(after, "aud_")
		if !ok {
			return AuditPage{}, oaierror.Invalid("invalid_request", "after", "after is not a cursor this API gave.")
		}
		before = &store.AuditEntry{ID: id, At: at}
	}
	entries, err := s.opt.Store.ListAuditWhere(ctx, accountID, f, before, limit+1)
	if err != nil {
		return AuditPage{}, s.fail(ctx, "list audit", err)
	}
	var page AuditPage
	if len(entries) > limit {
		entries = entries[:limit]
		page.Next = encodeCursor(entries[limit-1].At, entries[limit-1].ID)
	}
	page.Entries = entries
	return page, nil
}

// encodeCursor makes a page cursor of the last object's time and id.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + " " + id))
}

// decodeCursor reads a cursor encodeCursor made for an object whose id
// starts with idPrefix.
func decodeCursor(c, idPrefix string) (time.Time, string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, "", false
	}
	at, id, ok := strings.Cut(string(b), " ")
	t, err := time.Parse(time.RFC3339Nano, at)
	if !ok || err != nil || !strings.HasPrefix(id, idPrefix) {
		return time.Time{}, "", false
	}
	return t, id, true
}
