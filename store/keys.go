package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

const keyColumns = `id, account_id, description, rate_limit_rpm, ip_restrictions, models,
	expires_at, enabled, hint, created_at, last_used_at, version, tpm_limit, tokens_per_day, created_by,
	team_id, (SELECT teams.models FROM teams WHERE teams.id = keys.team_id)`

func scanKey(row scanner) (Key, error) {
	var (
		k            Key
		rpm          *int64
		ips          string
		models       *string
		by           *string
		team, tmodel *string
	)
	err := row.Scan(&k.ID, &k.AccountID, &k.Description, &rpm, &ips, &models,
		&k.ExpiresAt, &k.Enabled, &k.Hint, &k.CreatedAt, &k.LastUsedAt, &k.Version, &k.TPMLimit, &k.TokensPerDay, &by,
		&team, &tmodel)
	k.CreatedBy = deref(by)
	if err != nil {
		return Key{}, err
	}
	if team != nil {
		k.TeamID = *team
		if k.TeamModels, err = modelsOf(tmodel); err != nil {
			return Key{}, fmt.Errorf("key %s: team: %w", k.ID, err)
		}
	}
	if rpm != nil {
		n := int(*rpm)
		k.RateLimitRPM = &n
	}
	if err := json.Unmarshal([]byte(ips), &k.IPRestrictions); err != nil {
		return Key{}, fmt.Errorf("key %s: ip_restrictions: %w", k.ID, err)
	}
	if k.IPRestrictions == nil {
		k.IPRestrictions = []string{}
	}
	if models != nil {
		if err := json.Unmarshal([]byte(*models), &k.Models); err != nil {
			return Key{}, fmt.Errorf("key %s: models: %w", k.ID, err)
		}
		if k.Models == nil {
			k.Models = []string{}
		}
	}
	return k, nil
}

// keyOptionArgs are the editable options as arguments, in the order
// description, rate_limit_rpm, ip_restrictions, models, expires_at, enabled,
// tpm_limit, tokens_per_day.
func keyOptionArgs(k Key) ([]any, error) {
	var rpm any
	if k.RateLimitRPM != nil {
		rpm = int64(*k.RateLimitRPM)
	}
	ips := k.IPRestrictions
	if ips == nil {
		ips = []string{}
	}
	ipsJSON, err := json.Marshal(ips)
	if err != nil {
		return nil, fmt.Errorf("ip restrictions: %w", err)
	}
	var models any // nil: All Models
	if k.Models != nil {
		b, err := json.Marshal(k.Models)
		if err != nil {
			return nil, fmt.Errorf("models: %w", err)
		}
		models = string(b)
	}
	return []any{k.Description, rpm, string(ipsJSON), models, dbTimePtr(k.ExpiresAt), k.Enabled, k.TPMLimit, k.TokensPerDay}, nil
}

// CreateKey announces the new key: another replica may have cached its
// secret as unknown.
func (s *sqlStore) CreateKey(ctx context.Context, k Key, hash apikey.Hash) (Key, error) {
	return s.CreateKeyWithin(ctx, k, hash, 0)
}

// CreateKeyWithin with limit 0 does not count.
func (s *sqlStore) CreateKeyWithin(ctx context.Context, k Key, hash apikey.Hash, limit int) (Key, error) {
	id, err := newID(s.random, keyIDPrefix)
	if err != nil {
		return Key{}, fmt.Errorf("store: create key: %w", err)
	}
	opts, err := keyOptionArgs(k)
	if err != nil {
		return Key{}, fmt.Errorf("store: create key: %w", err)
	}
	args := append(append([]any{id, k.AccountID, hash[:], k.Hint, dbTime(s.now())}, opts...), nullable(k.CreatedBy))
	var out Key
	err = s.changeTx(ctx, Change{Kind: ChangeKey, ID: id}, func(q querier) error {
		if err := s.underCap(ctx, q, k.AccountID, `SELECT COUNT(*) FROM keys WHERE account_id = $1 AND deleted_at IS NULL`, limit); err != nil {
			return err
		}
		var err error
		out, err = scanKey(q.queryRow(ctx,
			`INSERT INTO keys (id, account_id, secret_hash, hint, created_at,
				description, rate_limit_rpm, ip_restrictions, models, expires_at, enabled, tpm_limit, tokens_per_day, created_by)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)
			RETURNING `+keyColumns,
			args...))
		return err
	})
	if err != nil {
		return Key{}, fmt.Errorf("store: create key: %w", err)
	}
	return out, nil
}

// KeyByHash finds a key by its secret, or by the secret a rotation
// replaced (GraceUntil then says until when it works).
func (s *sqlStore) KeyByHash(ctx context.Context, hash apikey.Hash) (Key, error) {
	var grace *time.Time
	k, err := scanKey(graceScanner{s.db.read().queryRow(ctx,
		`SELECT `+keyColumns+`, CASE WHEN secret_hash = $1 THEN NULL ELSE previous_until END
		FROM keys WHERE (secret_hash = $1 OR previous_secret_hash = $1) AND deleted_at IS NULL`, hash[:]), &grace})
	if err != nil {
		return Key{}, fmt.Errorf("store: key by hash: %w", err)
	}
	if grace != nil {
		g := grace.UTC()
		k.GraceUntil = &g
	}
	return k, nil
}

// graceScanner scans a key's columns and one more: the grace period's end.
type graceScanner struct {
	row   scanner
	grace **time.Time
}

func (g graceScanner) Scan(dest ...any) error { return g.row.Scan(append(dest, g.grace)...) }

// RotateKey announces the change, so that every cache drops both secrets.
func (s *sqlStore) RotateKey(ctx context.Context, id string, hash apikey.Hash, hint string, graceUntil *time.Time) (Key, error) {
	set := `previous_secret_hash = NULL, previous_until = NULL`
	args := []any{id, hash[:], hint}
	if graceUntil != nil {
		set = `previous_secret_hash = secret_hash, previous_until = $4`
		args = append(args, dbTime(*graceUntil))
	}
	var out Key
	err := s.changeTx(ctx, Change{Kind: ChangeKey, ID: id}, func(q querier) error {
		var err error
		out, err = scanKey(q.queryRow(ctx,
			`UPDATE keys SET `+set+`, secret_hash = $2, hint = $3, version = version + 1
			WHERE id = $1 AND deleted_at IS NULL
			RETURNING `+keyColumns,
			args...))
		return err
	})
	if err != nil {
		return Key{}, fmt.Errorf("store: rotate key: %w", err)
	}
	return out, nil
}

func (s *sqlStore) KeyByID(ctx context.Context, id string) (Key, error) {
	k, err := scanKey(s.db.read().queryRow(ctx,
		`SELECT `+keyColumns+` FROM keys WHERE id = $1 AND deleted_at IS NULL`, id))
	if err != nil {
		return Key{}, fmt.Errorf("store: key by id: %w", err)
	}
	return k, nil
}

func (s *sqlStore) ListKeys(ctx context.Context, accountID string) ([]Key, error) {
	keys := []Key{}
	err := s.db.read().queryEach(ctx,
		`SELECT `+keyColumns+` FROM keys WHERE account_id = $1 AND deleted_at IS NULL
		ORDER BY created_at DESC, id DESC`,
		[]any{accountID},
		func(row scanner) error {
			k, err := scanKey(row)
			keys = append(keys, k)
			return err
		})
	if err != nil {
		return nil, fmt.Errorf("store: list keys: %w", err)
	}
	return keys, nil
}

// UpdateKey announces the change to other replicas' caches.
func (s *sqlStore) UpdateKey(ctx context.Context, k Key) (Key, error) {
	return s.updateKey(ctx, k, 0)
}

func (s *sqlStore) UpdateKeyIfVersion(ctx context.Context, k Key, version int64) (Key, error) {
	if version < 1 {
		return Key{}, fmt.Errorf("store: update key: version %d is not a version", version)
	}
	return s.updateKey(ctx, k, version)
}

// updateKey replaces the options and adds one to the version; with a
// version other than 0, only if the key is still at that version.
func (s *sqlStore) updateKey(ctx context.Context, k Key, version int64) (Key, error) {
	opts, err := keyOptionArgs(k)
	if err != nil {
		return Key{}, fmt.Errorf("store: update key: %w", err)
	}
	var out Key
	err = s.changeTx(ctx, Change{Kind: ChangeKey, ID: k.ID}, func(q querier) error {
		var err error
		out, err = scanKey(q.queryRow(ctx,
			`UPDATE keys SET description = $2, rate_limit_rpm = $3, ip_restrictions = $4,
				models = $5, expires_at = $6, enabled = $7, tpm_limit = $8, tokens_per_day = $9, version = version + 1
			WHERE id = $1 AND deleted_at IS NULL AND ($10 = 0 OR version = $10)
			RETURNING `+keyColumns,
			append(append([]any{k.ID}, opts...), version)...))
		if errors.Is(err, ErrNotFound) && version != 0 {
			// Gone, or at another version: tell the two apart.
			var n int64
			if q.queryRow(ctx, `SELECT COUNT(*) FROM keys WHERE id = $1 AND deleted_at IS NULL`, k.ID).Scan(&n) == nil && n == 1 {
				return ErrConflict
			}
		}
		return err
	})
	if err != nil {
		return Key{}, fmt.Errorf("store: update key: %w", err)
	}
	return out, nil
}

// DeleteKey announces the deletion to other replicas' caches.
func (s *sqlStore) DeleteKey(ctx context.Context, id string) error {
	err := s.changeTx(ctx, Change{Kind: ChangeKey, ID: id}, func(q querier) error {
		n, err := q.exec(ctx,
			`UPDATE keys SET secret_hash = NULL, previous_secret_hash = NULL, deleted_at = $2 WHERE id = $1 AND deleted_at IS NULL`,
			id, dbTime(s.now()))
		if err == nil && n == 0 {
			err = ErrNotFound
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("store: delete key: %w", err)
	}
	return nil
}

func (s *sqlStore) TouchKeys(ctx context.Context, lastUsed map[string]time.Time) error {
	if len(lastUsed) == 0 {
		return nil
	}
	// A fixed order keeps concurrent batches from deadlocking on PostgreSQL.
	ids := make([]string, 0, len(lastUsed))
	for id := range lastUsed {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	err := s.db.inTx(ctx, func(q querier) error {
		for _, id := range ids {
			if _, err := q.exec(ctx,
				`UPDATE keys SET last_used_at = $2
				WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`,
				id, dbTime(lastUsed[id])); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store: touch keys: %w", err)
	}
	return nil
}
