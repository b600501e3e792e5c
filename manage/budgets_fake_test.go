package manage

import (
	"context"
	"time"

	"github.com/tollgate/tollgate/budget/calendar"

	"github.com/tollgate/tollgate/store"
)

// The fake store keeps no budgets: the budget rules are tested on the
// real stores (budgets_test.go).

func (f *fakeStore) SetBudgets(context.Context, string, string, []store.Budget) ([]store.Budget, error) {
	return nil, errFake
}

func (f *fakeStore) Budgets(context.Context, string, string) ([]store.Budget, error) {
	return []store.Budget{}, nil
}

func (f *fakeStore) BudgetSpend(context.Context, string, time.Time) (store.BudgetSpend, error) {
	return store.BudgetSpend{}, nil
}

func (f *fakeStore) AccountZone(context.Context, string) (calendar.Zone, error) {
	return calendar.Zone{Name: "UTC"}, nil
}

func (f *fakeStore) SetAccountTimezone(context.Context, string, string) (string, error) {
	return "", errFake
}

func (f *fakeStore) KeysWithBudgets(context.Context, string) ([]store.Budget, error) {
	return []store.Budget{}, nil
}
