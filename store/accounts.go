package store

import (
	"context"
	"fmt"

	"github.com/tollgate/tollgate/money"
)

const accountColumns = `id, email, plan, balance_nanos, reserved_nanos, created_at`

func scanAccount(row scanner) (Account, error) {
	var a Account
	err := row.Scan(&a.ID, &a.Email, &a.Plan, &a.Balance, &a.Reserved, &a.CreatedAt)
	return a, err
}

func (s *sqlStore) CreateAccount(ctx context.Context, a Account) (Account, error) {
	id, err := newID(s.random, accountIDPrefix)
	if err != nil {
		return Account{}, fmt.Errorf("store: create account: %w", err)
	}
	out, err := scanAccount(s.db.write().queryRow(ctx,
		`INSERT INTO accounts (id, email, plan, balance_nanos, created_at)
		VALUES ($1, $2, $3, $4, $5)
		RETURNING `+accountColumns,
		id, a.Email, a.Plan, int64(a.Balance), dbTime(s.now())))
	if err != nil {
		return Account{}, fmt.Errorf("store: create account: %w", err)
	}
	return out, nil
}

func (s *sqlStore) AccountByEmail(ctx context.Context, email string) (Account, error) {
	a, err := scanAccount(s.db.read().queryRow(ctx,
		`SELECT `+accountColumns+` FROM accounts WHERE email = $1`, email))
	if err != nil {
		return Account{}, fmt.Errorf("store: account by email: %w", err)
	}
	return a, nil
}

func (s *sqlStore) AccountByID(ctx context.Context, id string) (Account, error) {
	a, err := scanAccount(s.db.read().queryRow(ctx,
		`SELECT `+accountColumns+` FROM accounts WHERE id = $1`, id))
	if err != nil {
		return Account{}, fmt.Errorf("store: account by id: %w", err)
	}
	return a, nil
}

// CreditAccount announces the change to other replicas' caches.
func (s *sqlStore) CreditAccount(ctx context.Context, accountID string, amount money.Nanos) (Account, error) {
	var a Account
	err := s.changeTx(ctx, Change{Kind: ChangeAccount, ID: accountID}, func(q querier) error {
		var err error
		a, err = scanAccount(q.queryRow(ctx,
			`UPDATE accounts SET balance_nanos = balance_nanos + $2 WHERE id = $1
			RETURNING `+accountColumns,
			accountID, int64(amount)))
		return err
	})
	if err != nil {
		return Account{}, fmt.Errorf("store: credit account: %w", err)
	}
	return a, nil
}

// SetPlan announces the change: the key check caches accounts.
func (s *sqlStore) SetPlan(ctx context.Context, accountID, plan string) (Account, error) {
	if plan == "" {
		return Account{}, fmt.Errorf("store: set plan: empty plan")
	}
	var a Account
	err := s.changeTx(ctx, Change{Kind: ChangeAccount, ID: accountID}, func(q querier) error {
		var err error
		a, err = scanAccount(q.queryRow(ctx, `UPDATE accounts SET plan = $2 WHERE id = $1 RETURNING `+accountColumns, accountID, plan))
		return err
	})
	if err != nil {
		return Account{}, fmt.Errorf("store: set plan: %w", err)
	}
	return a, nil
}
