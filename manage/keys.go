package manage

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Key pages.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)

// KeyFilter selects keys of one account for ListKeys.
type KeyFilter struct {
	AccountID string
	// Status is "", "enabled", "disabled" or "expired".
	Status string
	// Text matches the id, the description or the hint, ignoring case.
	Text string
	// TeamID, when set, selects the keys of that team.
	TeamID string
	// After is the id of the last key of the previous page ("" for the
	// first page); Limit is the page size (0 → DefaultPageSize).
	After string
	Limit int
}

// KeyPage is one page of keys; Next is the cursor of the next page, "" on
// the last.
type KeyPage struct {
	Keys []store.Key
	Next string
}

// ETag is a key's version as an HTTP entity tag: it changes with every
// update, by any means (API, dashboard, CLI).
func ETag(k store.Key) string { return `"v` + strconv.FormatInt(k.Version, 10) + `"` }

// rules are keyopts' checks for cfg: model ids must exist in it. Without a
// configuration (the CLI run without --config) any well-formed id is
// accepted.
func (s *Service) rules(cfg *config.Config) keyopts.Rules {
	r := keyopts.Rules{Now: s.opt.Now}
	if cfg != nil {
		r.KnownModel = func(id string) bool {
			_, ok := cfg.Model(id)
			return ok
		}
	}
	return r
}

// AccountKeys returns the keys of an account the actor may see (every
// key, or with keys.read.own only the actor's own), newest first.
func (s *Service) AccountKeys(ctx context.Context, a Actor, accountID string) ([]store.Key, error) {
	if _, err := s.account(ctx, a, accountID, OpKeysReadOwn); err != nil {
		return nil, err
	}
	keys, err := s.opt.Store.ListKeys(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "list keys", err)
	}
	if !a.may(OpKeysRead) {
		keys = slices.DeleteFunc(keys, func(k store.Key) bool { return k.CreatedBy == "" || k.CreatedBy != a.MemberID })
	}
	return keys, nil
}

// ListKeys lists a page of an account's keys, newest first.
func (s *Service) ListKeys(ctx context.Context, a Actor, f KeyFilter) (KeyPage, error) {
	switch f.Status {
	case "", store.StatusEnabled, store.StatusDisabled, store.StatusExpired:
	default:
		return KeyPage{}, oaierror.Invalid("invalid_request", "status", "status must be enabled, disabled or expired.")
	}
	limit := f.Limit
	switch {
	case limit == 0:
		limit = DefaultPageSize
	case limit < 1 || limit > MaxPageSize:
		return KeyPage{}, oaierror.Invalid("invalid_request", "limit", fmt.Sprintf("limit must be from 1 to %d.", MaxPageSize))
	}
	keys, err := s.AccountKeys(ctx, a, f.AccountID)
	if err != nil {
		return KeyPage{}, err
	}
	now, text := s.opt.Now(), strings.ToLower(f.Text)
	var page KeyPage
	started := f.After == ""
	for _, k := range keys {
		if !started {
			started = k.ID == f.After
			continue
		}
		if f.Status != "" && k.Status(now) != f.Status {
			continue
		}
		if f.TeamID != "" && k.TeamID != f.TeamID {
			continue
		}
		if text != "" && !strings.Contains(strings.ToLower(k.ID+"\n"+k.Description+"\n"+k.Hint), text) {
			continue
		}
		if len(page.Keys) == limit {
			page.Next = page.Keys[limit-1].ID
			break
		}
		page.Keys = append(page.Keys, k)
	}
	if !started {
		return KeyPage{}, oaierror.Invalid("invalid_request", "after", "after names no key of this account (it may have been deleted): start from the first page.")
	}
	if page.Keys == nil {
		page.Keys = []store.Key{}
	}
	return page, nil
}

// key returns a key the actor may do op on: a key of its account it may
// see (every key with keys.read, its own with keys.read.own), and op on it
// (keys.write: any key, or its own with keys.write.own). Another account's
// key is not found.
func (s *Service) key(ctx context.Context, a Actor, id string, op Op) (store.Key, error) {
	if sc := opScope[op]; sc != "" && !a.can(sc) {
		return store.Key{}, ErrScope
	}
	k, err := s.opt.Store.KeyByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Key{}, ErrNotFound
	case err != nil:
		return store.Key{}, s.fail(ctx, "key lookup", err)
	}
	if !a.Admin() && k.AccountID != a.AccountID {
		return store.Key{}, ErrNotFound
	}
	own := a.MemberID != "" && k.CreatedBy == a.MemberID
	switch {
	case !a.may(OpKeysRead) && !(own && a.may(OpKeysReadOwn)):
		return store.Key{}, ErrPermission
	case op == OpKeysWrite:
		if !a.may(OpKeysWrite) && !(own && a.may(OpKeysWriteOwn)) {
			return store.Key{}, ErrPermission
		}
	case op != OpKeysRead && !a.may(op):
		return store.Key{}, ErrPermission
	}
	return k, nil
}

// GetKey returns one key.
func (s *Service) GetKey(ctx context.Context, a Actor, id string) (store.Key, error) {
	return s.key(ctx, a, id, OpKeysRead)
}

// CreateKey creates a key for the account with the options of p (the same
// rules as the dashboard's form and `tollgate key create`) and returns it
// with its secret, which is never shown again.
func (s *Service) CreateKey(ctx context.Context, a Actor, accountID string, p keyopts.Patch) (store.Key, string, error) {
	acct, err := s.account(ctx, a, accountID, OpKeysCreate)
	if err != nil {
		return store.Key{}, "", err
	}
	cfg := s.opt.Config()
	k, err := s.options(cfg, acct, nil, p)
	if err != nil {
		return store.Key{}, "", err
	}
	secret, err := apikey.Generate(s.keyPrefix(), s.opt.Random)
	if err != nil {
		return store.Key{}, "", s.fail(ctx, "key secret", err)
	}
	k.AccountID, k.Hint, k.CreatedBy = acct.ID, apikey.Hint(secret), a.MemberID
	k, err = s.opt.Store.CreateKeyWithin(ctx, k, apikey.HashOf(secret), Limits(cfg).KeysPerAccount)
	switch {
	case errors.Is(err, store.ErrLimit):
		return store.Key{}, "", ErrKeyLimit.With(fmt.Sprintf("This account has %d keys, as many as it may have: delete one before creating another.", Limits(cfg).KeysPerAccount), "")
	case err != nil:
		return store.Key{}, "", s.fail(ctx, "create key", err)
	}
	s.defaultBudgets(ctx, cfg, acct, k.ID)
	s.opt.KeyChanged(k.ID)
	s.auditWith(ctx, a, acct.ID, ActionKeyCreate, k.ID, AuditDetail{Name: k.Description})
	return k, secret, nil
}

// options are the key's options once p is applied to base (a new key when
// nil), by keyopts' rules for cfg and within the account's plan; an
// *OptionsError when they break one.
func (s *Service) options(cfg *config.Config, acct store.Account, base *store.Key, p keyopts.Patch) (store.Key, error) {
	var (
		k   store.Key
		err error
	)
	if base == nil {
		k, err = keyopts.Create(p, s.rules(cfg))
	} else {
		k, err = keyopts.Update(*base, p, s.rules(cfg))
	}
	if err != nil {
		return store.Key{}, invalid(err)
	}
	if err := inPlan(cfg, acct, p); err != nil {
		return store.Key{}, err
	}
	return k, nil
}

// CheckKey checks p as CreateKey (keyID "") or UpdateKey of keyID would,
// and saves nothing: nil when they would accept it, else their refusal
// (an *OptionsError for bad options). A form that finds its own fault
// with what was typed asks it, to show every fault at once.
func (s *Service) CheckKey(ctx context.Context, a Actor, accountID, keyID string, p keyopts.Patch) error {
	var base *store.Key
	if keyID != "" {
		k, err := s.key(ctx, a, keyID, OpKeysWrite)
		if err != nil {
			return err
		}
		base, accountID = &k, k.AccountID
	}
	op := OpKeysCreate
	if base != nil {
		op = OpKeysWriteOwn // the key's own check passed
	}
	acct, err := s.account(ctx, a, accountID, op)
	if err != nil {
		return err
	}
	k, err := s.options(s.opt.Config(), acct, base, p)
	if err != nil || base == nil {
		return err
	}
	return s.keyWithinTeam(ctx, *base, k.Models)
}

// inPlan refuses an allow-list naming a model outside the account's plan.
func inPlan(cfg *config.Config, acct store.Account, p keyopts.Patch) error {
	if p.Models == nil || cfg == nil {
		return nil
	}
	plan, _ := cfg.Plan(acct.Plan)
	for _, m := range *p.Models {
		if m = strings.TrimSpace(m); plan == nil || !plan.AllowsModel(m) {
			m = oaierror.Clip(m, 100)
			return &OptionsError{NotInPlan: m, Plan: acct.Plan, Fields: keyopts.Errors{{Field: keyopts.FieldModels,
				Message: fmt.Sprintf("%q is not in the account's plan (%s)", m, acct.Plan)}}}
		}
	}
	return nil
}

// UpdateKey changes the options p sets and leaves the others as they are.
// ifMatch, when given, must be the key's current ETag (ErrPrecondition
// otherwise), so that two editors cannot overwrite each other unknowingly.
// Without it, a change made by someone else between the read and the write
// is read again and p applied on top of it: a patch never undoes another.
func (s *Service) UpdateKey(ctx context.Context, a Actor, id, ifMatch string, p keyopts.Patch) (store.Key, error) {
	for attempt := 0; ; attempt++ {
		before, updated, err := s.updateKey(ctx, a, id, ifMatch, p)
		if errors.Is(err, store.ErrConflict) {
			if ifMatch == "" && attempt < 5 {
				continue
			}
			return store.Key{}, ErrPrecondition
		}
		if err != nil {
			return store.Key{}, err
		}
		s.opt.KeyChanged(updated.ID)
		s.auditWith(ctx, a, updated.AccountID, keyUpdateAction(p), updated.ID, AuditDetail{Name: updated.Description, Changes: keyChanges(before, updated)})
		return updated, nil
	}
}

// updateKey reads the key, applies p and writes it if the key is still at
// the version read; store.ErrConflict if it is not. It returns the key as
// read and as written.
func (s *Service) updateKey(ctx context.Context, a Actor, id, ifMatch string, p keyopts.Patch) (before, after store.Key, err error) {
	k, err := s.key(ctx, a, id, OpKeysWrite)
	if err != nil {
		return store.Key{}, store.Key{}, err
	}
	acct, err := s.account(ctx, a, k.AccountID, OpKeysWriteOwn) // the key's own check passed
	if err != nil {
		return store.Key{}, store.Key{}, err
	}
	// A change that is invalid on its face is refused as such (400)
	// whatever its precondition: If-Match is judged on valid changes only.
	updated, err := s.options(s.opt.Config(), acct, &k, p)
	if err != nil {
		return store.Key{}, store.Key{}, err
	}
	if err := s.keyWithinTeam(ctx, k, updated.Models); err != nil {
		return store.Key{}, store.Key{}, err
	}
	if ifMatch != "" && ifMatch != "*" && ifMatch != ETag(k) {
		return store.Key{}, store.Key{}, ErrPrecondition
	}
	updated, err = s.opt.Store.UpdateKeyIfVersion(ctx, updated, k.Version)
	switch {
	case errors.Is(err, store.ErrConflict):
		return store.Key{}, store.Key{}, store.ErrConflict
	case errors.Is(err, store.ErrNotFound):
		return store.Key{}, store.Key{}, ErrNotFound
	case err != nil:
		return store.Key{}, store.Key{}, s.fail(ctx, "update key", err)
	}
	return k, updated, nil
}

// DeleteKey deletes a key: its secret stops working at once; its usage
// stays.
func (s *Service) DeleteKey(ctx context.Context, a Actor, id string) error {
	k, err := s.key(ctx, a, id, OpKeysWrite)
	if err != nil {
		return err
	}
	switch err := s.opt.Store.DeleteKey(ctx, id); {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "delete key", err)
	}
	s.opt.KeyChanged(id)
	s.auditWith(ctx, a, k.AccountID, ActionKeyDelete, id, AuditDetail{Name: k.Description})
	return nil
}

// MaxRotationGrace bounds how long a replaced secret may keep working.
const MaxRotationGrace = 7 * 24 * time.Hour

// RotateKey gives a key a new secret, returned this once. With a grace
// period, the old secret keeps working that long (so that deployments can
// move to the new one); without, it stops at once.
func (s *Service) RotateKey(ctx context.Context, a Actor, id string, grace time.Duration) (store.Key, string, *time.Time, error) {
	if grace < 0 || grace > MaxRotationGrace {
		return store.Key{}, "", nil, oaierror.Invalid("invalid_request", "grace_seconds", "grace_seconds must be from 0 to 604800 (7 days).")
	}
	k, err := s.key(ctx, a, id, OpKeysWrite)
	if err != nil {
		return store.Key{}, "", nil, err
	}
	secret, err := apikey.Generate(s.keyPrefix(), s.opt.Random)
	if err != nil {
		return store.Key{}, "", nil, s.fail(ctx, "key secret", err)
	}
	var until *time.Time
	if grace > 0 {
		t := s.opt.Now().Add(grace).UTC()
		until = &t
	}
	k, err = s.opt.Store.RotateKey(ctx, k.ID, apikey.HashOf(secret), apikey.Hint(secret), until)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Key{}, "", nil, ErrNotFound
	case err != nil:
		return store.Key{}, "", nil, s.fail(ctx, "rotate key", err)
	}
	s.opt.KeyChanged(k.ID)
	s.auditWith(ctx, a, k.AccountID, ActionKeyRotate, k.ID, AuditDetail{Name: k.Description,
		Changes: map[string][2]string{"grace": {"", graceText(grace)}}})
	return k, secret, until, nil
}

// keyPrefix is the configuration's key prefix.
func (s *Service) keyPrefix() string {
	if cfg := s.opt.Config(); cfg != nil && cfg.KeyPrefix != "" {
		return cfg.KeyPrefix
	}
	return apikey.DefaultPrefix
}
