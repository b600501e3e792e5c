package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

// ID prefixes of the management API's objects.
const (
	tokenIDPrefix = "mt_"
	auditIDPrefix = "aud_"
)

// ManagementToken authorises calls to the management API. Only the hash of
// its secret is stored; the secret is shown once, when it is made.
type ManagementToken struct {
	ID string
	// AccountID is the one account the token acts for; "" makes an admin
	// token, which acts for every account.
	AccountID string
	Name      string
	// Scopes are what the token may do (keys:read, keys:write,
	// usage:read, webhooks:read, webhooks:write); an admin token may do
	// everything whatever they say.
	Scopes    []string
	Hint      string
	CreatedAt time.Time
	// ExpiresAt is nil for never; the token stops working at this instant.
	ExpiresAt *time.Time
	// CreatedBy is the member who made the token, "" for none (the CLI, an
	// admin token, tokens of before members): a member's token may never
	// do more than the member's role, and ends with the member.
	CreatedBy string
}

// Admin reports whether the token acts for every account.
func (t ManagementToken) Admin() bool { return t.AccountID == "" }

// AuditEntry is one management action.
type AuditEntry struct {
	ID string
	// AccountID is the account acted on, "" for none.
	AccountID string
	// Actor is who acted: "token:<id>", "user:<member id>" (a dashboard
	// session; "user:<account id>" before members) or "cli".
	Actor string
	// MemberID is the person who acted, "" for none (the CLI, an admin
	// token, entries of before members); SSOSubject is its single sign-on
	// subject when it signed in so.
	MemberID, SSOSubject string
	// Door is how the actor came in: "dashboard", "api" or "cli" ("" for
	// entries of before).
	Door string
	// Action names what was done: "key.create", "token.revoke"…
	Action string
	// Target is the id of the object acted on.
	Target string
	// Address is the caller's address, "" when there is none (the CLI).
	Address string
	At      time.Time
	// Detail is what the action changed, a JSON object of at most
	// MaxAuditDetail bytes (manage writes it; never a secret); "" when
	// none was recorded.
	Detail string
}

// MaxAuditDetail bounds an audit entry's Detail; AddAudit refuses more.
const MaxAuditDetail = 4096

// AuditFilter narrows ListAuditWhere: one action ("" for any), a range
// of times [From, To) (a zero bound is open) and one member.
type AuditFilter struct {
	Action   string
	From, To time.Time
	// MemberID selects one person's entries ("" for anyone's).
	MemberID string
}

// MaxAuditEntries bounds one ListAudit call.
const MaxAuditEntries = 1000

const tokenColumns = `id, account_id, name, scopes, hint, created_at, expires_at, created_by`

func scanToken(row scanner) (ManagementToken, error) {
	var (
		t       ManagementToken
		account *string
		scopes  string
		by      *string
	)
	if err := row.Scan(&t.ID, &account, &t.Name, &scopes, &t.Hint, &t.CreatedAt, &t.ExpiresAt, &by); err != nil {
		return ManagementToken{}, err
	}
	t.CreatedBy = deref(by)
	if account != nil {
		t.AccountID = *account
	}
	t.Scopes = strings.Fields(scopes)
	return t, nil
}

// nullable is s, or SQL NULL when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *sqlStore) CreateToken(ctx context.Context, t ManagementToken, hash apikey.Hash) (ManagementToken, error) {
	return s.CreateTokenWithin(ctx, t, hash, 0)
}

// CreateTokenWithin with limit 0 does not count.
func (s *sqlStore) CreateTokenWithin(ctx context.Context, t ManagementToken, hash apikey.Hash, limit int) (ManagementToken, error) {
	id, err := newID(s.random, tokenIDPrefix)
	if err != nil {
		return ManagementToken{}, fmt.Errorf("store: create token: %w", err)
	}
	if t.AccountID == "" {
		limit = 0
	}
	var out ManagementToken
	err = s.db.inTx(ctx, func(q querier) error {
		if err := s.underCap(ctx, q, t.AccountID, `SELECT COUNT(*) FROM management_tokens WHERE account_id = $1 AND revoked_at IS NULL`, limit); err != nil {
			return err
		}
		var err error
		out, err = scanToken(q.queryRow(ctx,
			`INSERT INTO management_tokens (id, account_id, name, scopes, secret_hash, hint, created_at, expires_at, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			RETURNING `+tokenColumns,
			id, nullable(t.AccountID), t.Name, strings.Join(t.Scopes, " "), hash[:], t.Hint, dbTime(s.now()), dbTimePtr(t.ExpiresAt), nullable(t.CreatedBy)))
		return err
	})
	if err != nil {
		return ManagementToken{}, fmt.Errorf("store: create token: %w", err)
	}
	return out, nil
}

// underCap holds the account's row until q's transaction ends (SQLite's
// transactions hold the whole database from their start) and returns
// ErrLimit when count, a query of one COUNT(*) with the account id as $1,
// is limit or more; ErrNotFound when there is no such account. limit 0
// checks nothing.
func (s *sqlStore) underCap(ctx context.Context, q querier, accountID, count string, limit int) error {
	if limit == 0 {
		return nil
	}
	var id string
	if err := q.queryRow(ctx, `SELECT id FROM accounts WHERE id = $1`+s.db.forUpdate(), accountID).Scan(&id); err != nil {
		return fmt.Errorf("hold account: %w", err)
	}
	var n int
	if err := q.queryRow(ctx, count, accountID).Scan(&n); err != nil {
		return fmt.Errorf("count: %w", err)
	}
	if n >= limit {
		return ErrLimit
	}
	return nil
}

func (s *sqlStore) TokenByHash(ctx context.Context, hash apikey.Hash, now time.Time) (ManagementToken, error) {
	t, err := scanToken(s.db.read().queryRow(ctx,
		`SELECT `+tokenColumns+` FROM management_tokens
		WHERE secret_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > $2)`,
		hash[:], dbTime(now)))
	if err != nil {
		return ManagementToken{}, fmt.Errorf("store: token by hash: %w", err)
	}
	return t, nil
}

func (s *sqlStore) TokenByID(ctx context.Context, id string) (ManagementToken, error) {
	t, err := scanToken(s.db.read().queryRow(ctx,
		`SELECT `+tokenColumns+` FROM management_tokens WHERE id = $1 AND revoked_at IS NULL`, id))
	if err != nil {
		return ManagementToken{}, fmt.Errorf("store: token by id: %w", err)
	}
	return t, nil
}

func (s *sqlStore) ListTokens(ctx context.Context, accountID string) ([]ManagementToken, error) {
	where := `account_id = $1`
	args := []any{accountID}
	if accountID == "" {
		where, args = `account_id IS NULL`, nil
	}
	tokens := []ManagementToken{}
	err := s.db.read().queryEach(ctx,
		`SELECT `+tokenColumns+` FROM management_tokens WHERE `+where+` AND revoked_at IS NULL
		ORDER BY created_at DESC, id DESC`,
		args,
		func(row scanner) error {
			t, err := scanToken(row)
			tokens = append(tokens, t)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: list tokens: %w", err)
	}
	return tokens, nil
}

func (s *sqlStore) RevokeToken(ctx context.Context, id string) error {
	n, err := s.db.write().exec(ctx,
		`UPDATE management_tokens SET revoked_at = $2, secret_hash = $3 WHERE id = $1 AND revoked_at IS NULL`,
		id, dbTime(s.now()), revokedHash(id))
	if err == nil && n == 0 {
		err = ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("store: revoke token: %w", err)
	}
	return nil
}

// revokedHash replaces a revoked token's secret hash: the column stays
// unique and non-null, and no secret hashes to it (it is not a SHA-256).
func revokedHash(id string) []byte { return []byte("revoked:" + id) }

func (s *sqlStore) AddAudit(ctx context.Context, e AuditEntry) error {
	id, err := newID(s.random, auditIDPrefix)
	if err != nil {
		return fmt.Errorf("store: add audit: %w", err)
	}
	at := e.At
	if at.IsZero() {
		at = s.now()
	}
	if len(e.Detail) > MaxAuditDetail {
		return fmt.Errorf("store: add audit: detail of %d bytes exceeds %d", len(e.Detail), MaxAuditDetail)
	}
	_, err = s.db.write().exec(ctx,
		`INSERT INTO audit_log (id, account_id, actor, action, target, address, at, detail, member_id, sso_subject, door)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`,
		id, nullable(e.AccountID), e.Actor, e.Action, e.Target, e.Address, dbTime(at), nullable(e.Detail),
		nullable(e.MemberID), nullable(e.SSOSubject), nullable(e.Door))
	if err != nil {
		return fmt.Errorf("store: add audit: %w", err)
	}
	return nil
}

func (s *sqlStore) ListAudit(ctx context.Context, accountID string, before *AuditEntry, limit int) ([]AuditEntry, error) {
	return s.ListAuditWhere(ctx, accountID, AuditFilter{}, before, limit)
}

func (s *sqlStore) ListAuditWhere(ctx context.Context, accountID string, f AuditFilter, before *AuditEntry, limit int) ([]AuditEntry, error) {
	if limit <= 0 || limit > MaxAuditEntries {
		limit = MaxAuditEntries
	}
	q := `SELECT id, account_id, actor, action, target, address, at, COALESCE(detail, ''),
		COALESCE(member_id, ''), COALESCE(sso_subject, ''), COALESCE(door, '') FROM audit_log WHERE `
	var args []any
	if accountID == "" {
		q += `account_id IS NULL`
	} else {
		q += `account_id = $1`
		args = append(args, accountID)
	}
	if before != nil {
		n := len(args)
		q += fmt.Sprintf(` AND (at < $%d OR (at = $%d AND id < $%d))`, n+1, n+1, n+2)
		args = append(args, dbTime(before.At), before.ID)
	}
	if f.Action != "" {
		args = append(args, f.Action)
		q += fmt.Sprintf(` AND action = $%d`, len(args))
	}
	if f.MemberID != "" {
		args = append(args, f.MemberID)
		q += fmt.Sprintf(` AND member_id = $%d`, len(args))
	}
	if !f.From.IsZero() {
		args = append(args, dbTime(f.From))
		q += fmt.Sprintf(` AND at >= $%d`, len(args))
	}
	if !f.To.IsZero() {
		args = append(args, dbTime(f.To))
		q += fmt.Sprintf(` AND at < $%d`, len(args))
	}
	q += fmt.Sprintf(` ORDER BY at DESC, id DESC LIMIT %d`, limit)
	entries := []AuditEntry{}
	err := s.db.read().queryEach(ctx, q, args, func(row scanner) error {
		var (
			e       AuditEntry
			account *string
		)
		if err := row.Scan(&e.ID, &account, &e.Actor, &e.Action, &e.Target, &e.Address, &e.At, &e.Detail, &e.MemberID, &e.SSOSubject, &e.Door); err != nil {
			return err
		}
		if account != nil {
			e.AccountID = *account
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	return entries, nil
}

// Idempotent is what is stored of a call made with an Idempotency-Key.
type Idempotent struct {
	RequestHash []byte
	// Sealed is the first answer, sealed by the caller; nil while the
	// first call runs.
	Sealed    []byte
	CreatedAt time.Time
}

// IdempotencyTTL is how long a first answer is kept for retries.
const IdempotencyTTL = 24 * time.Hour

func (s *sqlStore) BeginIdempotent(ctx context.Context, actor, key string, requestHash []byte, takeOverBefore time.Time) (Idempotent, bool, error) {
	now := dbTime(s.now())
	var (
		out     Idempotent
		created bool
	)
	err := s.db.inTx(ctx, func(q querier) error {
		// Forget answers past their time, and take over a first call that
		// has been running too long (its process died).
		if _, err := q.exec(ctx, `DELETE FROM idempotency WHERE created_at < $1`, now.Add(-IdempotencyTTL)); err != nil {
			return err
		}
		if _, err := q.exec(ctx, `DELETE FROM idempotency WHERE actor = $1 AND key = $2 AND sealed IS NULL AND created_at < $3`,
			actor, key, dbTime(takeOverBefore)); err != nil {
			return err
		}
		n, err := q.exec(ctx, `INSERT INTO idempotency (actor, key, request_hash, created_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (actor, key) DO NOTHING`, actor, key, requestHash, now)
		if err != nil {
			return err
		}
		if n == 1 {
			created, out = true, Idempotent{RequestHash: requestHash, CreatedAt: now}
			return nil
		}
		return q.queryRow(ctx, `SELECT request_hash, sealed, created_at FROM idempotency WHERE actor = $1 AND key = $2`, actor, key).
			Scan(&out.RequestHash, &out.Sealed, &out.CreatedAt)
	})
	if err != nil {
		return Idempotent{}, false, fmt.Errorf("store: begin idempotent: %w", err)
	}
	return out, created, nil
}

func (s *sqlStore) FinishIdempotent(ctx context.Context, actor, key string, sealed []byte) error {
	if sealed == nil {
		sealed = []byte{}
	}
	if _, err := s.db.write().exec(ctx, `UPDATE idempotency SET sealed = $3 WHERE actor = $1 AND key = $2`, actor, key, sealed); err != nil {
		return fmt.Errorf("store: finish idempotent: %w", err)
	}
	return nil
}

func (s *sqlStore) AbandonIdempotent(ctx context.Context, actor, key string) error {
	if _, err := s.db.write().exec(ctx, `DELETE FROM idempotency WHERE actor = $1 AND key = $2 AND sealed IS NULL`, actor, key); err != nil {
		return fmt.Errorf("store: abandon idempotent: %w", err)
	}
	return nil
}
