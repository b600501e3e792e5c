package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tollgate/tollgate/money"
)

const accountColumns = `id, email, plan, balance_nanos, reserved_nanos, created_at, low_balance_threshold`

func scanAccount(row scanner) (Account, error) {
	var a Account
	var low *int64
	err := row.Scan(&a.ID, &a.Email, &a.Plan, &a.Balance, &a.Reserved, &a.CreatedAt, &low)
	if low != nil {
		n := money.Nanos(*low)
		a.LowBalanceThreshold = &n
	}
	return a, err
}

func (s *sqlStore) CreateAccount(ctx context.Context, a Account) (Account, error) {
	id, err := newID(s.random, accountIDPrefix)
	if err != nil {
		return Account{}, fmt.Errorf("store: create account: %w", err)
	}
	var out Account
	err = s.db.inTx(ctx, func(q querier) error {
		var err error
		out, err = scanAccount(q.queryRow(ctx,
			`INSERT INTO accounts (id, email, plan, balance_nanos, created_at)
			VALUES ($1, $2, $3, $4, $5)
			RETURNING `+accountColumns,
			id, a.Email, a.Plan, int64(a.Balance), dbTime(s.now())))
		if err != nil {
			return err
		}
		if _, err := s.insertMember(ctx, q, OwnerMemberID(id), Member{AccountID: id, Email: a.Email, Role: RoleOwner}, out.CreatedAt); err != nil {
			return fmt.Errorf("owner member: %w", err)
		}
		if out.Balance == 0 {
			return nil
		}
		return s.addBalanceChange(ctx, q, out, BalanceOpening, out.Balance, out.CreatedAt)
	})
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

// CreditAccount announces the change to other replicas' caches. A
// negative amount (a correction) that takes the balance below its low
// balance threshold alerts as a debit does.
func (s *sqlStore) CreditAccount(ctx context.Context, accountID string, amount money.Nanos) (Account, error) {
	if amount == math.MinInt64 {
		return Account{}, errors.New("store: credit account: amount out of range")
	}
	var a Account
	err := s.changeTx(ctx, Change{Kind: ChangeAccount, ID: accountID}, func(q querier) error {
		var err error
		var crossings int64
		a, err = scanAccount(crossingScanner{q.queryRow(ctx,
			`UPDATE accounts SET balance_nanos = balance_nanos - $2,
				low_balance_crossings = low_balance_crossings + `+lowBalanceFall+`
			WHERE id = $1 RETURNING `+accountColumns+`, low_balance_crossings`,
			accountID, -int64(amount)), &crossings})
		if err != nil {
			return err
		}
		if err := s.addBalanceChange(ctx, q, a, BalanceCredit, amount, s.now()); err != nil {
			return err
		}
		return s.alertIfFell(ctx, q, a, -int64(amount), crossings)
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

// Balance change kinds.
const (
	BalanceOpening = "opening" // the balance an account was created with
	BalanceCredit  = "credit"  // CreditAccount (negative: a correction)
)

const balanceChangeIDPrefix = "bal_"

// addBalanceChange records, in the transaction that made it, a change of
// amount that left the account at a.Balance.
func (s *sqlStore) addBalanceChange(ctx context.Context, q querier, a Account, kind string, amount money.Nanos, at time.Time) error {
	id, err := newID(s.random, balanceChangeIDPrefix)
	if err != nil {
		return err
	}
	_, err = q.exec(ctx,
		`INSERT INTO balance_changes (id, account_id, kind, amount_nanos, balance_nanos, at) VALUES ($1, $2, $3, $4, $5, $6)`,
		id, a.ID, kind, int64(amount), int64(a.Balance), dbTime(at))
	return err
}

func (s *sqlStore) BalanceChanges(ctx context.Context, accountID string, from time.Time, limit int) ([]BalanceChange, error) {
	if limit <= 0 || limit > MaxBalanceChanges {
		limit = MaxBalanceChanges
	}
	out := []BalanceChange{}
	err := s.db.read().queryEach(ctx,
		fmt.Sprintf(`SELECT id, account_id, kind, amount_nanos, balance_nanos, at FROM balance_changes
		WHERE account_id = $1 AND at >= $2 ORDER BY at, id LIMIT %d`, limit),
		[]any{accountID, dbTime(from)}, func(row scanner) error {
			var c BalanceChange
			if err := row.Scan(&c.ID, &c.AccountID, &c.Kind, &c.Amount, &c.Balance, &c.At); err != nil {
				return err
			}
			out = append(out, c)
			return nil
		})
	if err != nil {
		return nil, fmt.Errorf("store: balance changes: %w", err)
	}
	return out, nil
}
