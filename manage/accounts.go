package manage

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"unicode"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Accounts (admin tokens only) and the models an account may use.

// More audit log actions.
const (
	ActionAccountCreate   = "account.create"
	ActionAccountCredit   = "account.credit"
	ActionAccountPlan     = "account.plan"
	ActionAccountPassword = "account.password"
)

// maxCredit bounds one credit (a typo of a few zeros should not pass).
const maxCredit = 1_000_000 * money.PerDollar

func (s *Service) adminOnly(a Actor) error {
	if !a.Admin() {
		return ErrAdminOnly
	}
	return nil
}

// checkPlan refuses a plan the configuration does not define; without a
// configuration (the CLI run without --config), any short printable name.
func (s *Service) checkPlan(plan string) error {
	cfg := s.opt.Config()
	if cfg == nil {
		if plan == "" || len(plan) > 64 || strings.ContainsFunc(plan, unicode.IsControl) {
			return oaierror.Invalid("invalid_request", "plan", "plan must be a name of at most 64 printable characters.")
		}
		return nil
	}
	if _, ok := cfg.Plan(plan); !ok {
		names := make([]string, len(cfg.Plans))
		for i, p := range cfg.Plans {
			names[i] = p.Name
		}
		return oaierror.Invalid("invalid_request", "plan", fmt.Sprintf("plan must be one of the configuration's plans (%s), not %q.",
			strings.Join(names, ", "), oaierror.Clip(plan, 64)))
	}
	return nil
}

// CreateAccount makes an account (admin only).
func (s *Service) CreateAccount(ctx context.Context, a Actor, email, plan string, balance money.Nanos) (store.Account, error) {
	if err := s.adminOnly(a); err != nil {
		return store.Account{}, err
	}
	email = strings.TrimSpace(email)
	if at := strings.IndexByte(email, '@'); at < 1 || at == len(email)-1 || len(email) > 254 || strings.ContainsAny(email, " \t\r\n") {
		return store.Account{}, oaierror.Invalid("invalid_request", "email", "email must be an email address.")
	}
	if err := s.checkPlan(plan); err != nil {
		return store.Account{}, err
	}
	if balance < 0 || balance > maxCredit {
		return store.Account{}, oaierror.Invalid("invalid_request", "balance_usd", "balance_usd must be from 0 to 1000000.")
	}
	acct, err := s.opt.Store.CreateAccount(ctx, store.Account{Email: email, Plan: plan, Balance: balance})
	switch {
	case errors.Is(err, store.ErrConflict):
		return store.Account{}, oaierror.Error{Status: http.StatusConflict, Code: "account_exists", Type: oaierror.TypeInvalidRequest,
			Message: "An account with this email exists.", Param: "email"}
	case err != nil:
		return store.Account{}, s.fail(ctx, "create account", err)
	}
	s.audit(ctx, a, acct.ID, ActionAccountCreate, acct.ID)
	return acct, nil
}

// GetAccount reads an account and its balance (admin, or the account's
// own token).
func (s *Service) GetAccount(ctx context.Context, a Actor, id string) (store.Account, error) {
	return s.account(ctx, a, id, OpAccountRead)
}

// CreditAccount adds a positive amount to the balance (admin only). With
// an Idempotency-Key, a retried credit is never a second credit.
func (s *Service) CreditAccount(ctx context.Context, a Actor, id string, amount money.Nanos) (store.Account, error) {
	if err := s.adminOnly(a); err != nil {
		return store.Account{}, err
	}
	if amount <= 0 || amount > maxCredit {
		return store.Account{}, oaierror.Invalid("invalid_request", "amount_usd", "amount_usd must be more than 0 and at most 1000000.")
	}
	acct, err := s.account(ctx, a, id, OpAccountRead)
	if err != nil {
		return store.Account{}, err
	}
	if acct.Balance > math.MaxInt64-amount {
		return store.Account{}, oaierror.Invalid("invalid_request", "amount_usd", "amount_usd would take the balance past what it can hold.")
	}
	acct, err = s.opt.Store.CreditAccount(ctx, id, amount)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Account{}, ErrNotFound
	case err != nil:
		return store.Account{}, s.fail(ctx, "credit account", err)
	}
	s.audit(ctx, a, id, ActionAccountCredit, id)
	return acct, nil
}

// AccountByEmail finds an account by its email (admin only: the CLI
// names accounts so).
func (s *Service) AccountByEmail(ctx context.Context, a Actor, email string) (store.Account, error) {
	if err := s.adminOnly(a); err != nil {
		return store.Account{}, err
	}
	acct, err := s.opt.Store.AccountByEmail(ctx, strings.TrimSpace(email))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Account{}, ErrNotFound
	case err != nil:
		return store.Account{}, s.fail(ctx, "account lookup", err)
	}
	return acct, nil
}

// SetPassword stores the encoded hash of the password the account holder
// signs in to the dashboard with, and signs the account out of every
// session (admin only).
func (s *Service) SetPassword(ctx context.Context, a Actor, id, passwordHash string) error {
	if err := s.adminOnly(a); err != nil {
		return err
	}
	switch err := s.opt.Store.SetPassword(ctx, id, passwordHash); {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "set password", err)
	}
	s.audit(ctx, a, id, ActionAccountPassword, id)
	return nil
}

// SetPlan moves an account to another plan (admin only).
func (s *Service) SetPlan(ctx context.Context, a Actor, id, plan string) (store.Account, error) {
	if err := s.adminOnly(a); err != nil {
		return store.Account{}, err
	}
	if err := s.checkPlan(plan); err != nil {
		return store.Account{}, err
	}
	acct, err := s.opt.Store.SetPlan(ctx, id, plan)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Account{}, ErrNotFound
	case err != nil:
		return store.Account{}, s.fail(ctx, "set plan", err)
	}
	s.audit(ctx, a, id, ActionAccountPlan, id)
	return acct, nil
}

// AccountChange is what UpdateAccount changes: the plan when Plan is set,
// the low balance threshold when SetLowBalance is (LowBalance nil: none).
type AccountChange struct {
	Plan          *string
	SetLowBalance bool
	LowBalance    *money.Nanos
}

// UpdateAccount changes an account's plan and low balance threshold
// (admin only), all or nothing as far as the checks go: the threshold is
// checked before the plan changes.
func (s *Service) UpdateAccount(ctx context.Context, a Actor, id string, c AccountChange) (store.Account, error) {
	if err := s.adminOnly(a); err != nil {
		return store.Account{}, err
	}
	if c.SetLowBalance {
		if err := s.checkLowBalance(c.LowBalance); err != nil {
			return store.Account{}, err
		}
	}
	if c.Plan != nil {
		if _, err := s.SetPlan(ctx, a, id, *c.Plan); err != nil {
			return store.Account{}, err
		}
	}
	if c.SetLowBalance {
		return s.SetLowBalanceThreshold(ctx, a, id, c.LowBalance)
	}
	return s.GetAccount(ctx, a, id)
}

// PlanModel is a model an account's plan allows, and whether a provider
// can serve it now (the key check's and GET /v1/models' answer).
type PlanModel struct {
	*config.Model
	Available bool
}

// PlanModels are the models the account's plan allows, in the
// configuration's order.
func (s *Service) PlanModels(ctx context.Context, a Actor, accountID string) ([]PlanModel, error) {
	acct, err := s.account(ctx, a, accountID, OpKeysReadOwn)
	if err != nil {
		return nil, err
	}
	cfg := s.opt.Config()
	out := []PlanModel{}
	for _, m := range cfg.PlanModels(acct.Plan) {
		out = append(out, PlanModel{Model: m, Available: cfg.ModelAvailable(m, s.opt.Available)})
	}
	return out, nil
}
