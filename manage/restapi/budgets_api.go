package restapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// budgetInput is one budget of a PUT body.
type budgetInput struct {
	Period          string      `json:"period"`
	AmountUSD       money.Nanos `json:"amount_usd"`
	AlertThresholds []int       `json:"alert_thresholds"`
}

// budgetsOf reads the body's budgets (required; [] removes them all).
func budgetsOf(fields map[string]json.RawMessage) ([]store.Budget, error) {
	var in []budgetInput
	if ok, err := field(fields, "budgets", &in); err != nil {
		return nil, err
	} else if !ok || in == nil {
		return nil, oaierror.Invalid("invalid_request", "budgets", "Give budgets: a list of {period, amount_usd}; [] removes them all.")
	}
	if len(in) > store.MaxBudgets {
		return nil, oaierror.Invalid("invalid_request", "budgets", "At most one budget per period: day, week, month, total.")
	}
	out := make([]store.Budget, len(in))
	for i, b := range in {
		out[i] = store.Budget{Period: b.Period, Amount: b.AmountUSD, Thresholds: b.AlertThresholds}
	}
	return out, nil
}

// getBudgets answers GET on the budgets of the key or team in the path,
// read with read.
func getBudgets(read func(context.Context, manage.Actor, string) (manage.BudgetReport, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
		rep, err := read(r.Context(), a, r.PathValue("id"))
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, manage.BudgetsView(rep))
	}
}

// putBudgets answers PUT on the budgets of the key or team in the path,
// replaced with set.
func putBudgets(set func(context.Context, manage.Actor, string, []store.Budget) (manage.BudgetReport, error)) handler {
	return func(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
		fields, err := readBody(r, "budgets")
		if err != nil {
			return err
		}
		bs, err := budgetsOf(fields)
		if err != nil {
			return err
		}
		rep, err := set(r.Context(), a, r.PathValue("id"), bs)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, manage.BudgetsView(rep))
	}
}

func (api *API) getAccountBudgets(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	rep, err := api.svc.AccountBudgets(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.BudgetsView(rep))
}

func (api *API) putAccountBudgets(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "budgets", "timezone")
	if err != nil {
		return err
	}
	bs, err := budgetsOf(fields)
	if err != nil {
		return err
	}
	var tz *string
	if _, err := field(fields, "timezone", &tz); err != nil {
		return err
	}
	rep, err := api.svc.SetAccountBudgets(r.Context(), a, r.PathValue("id"), tz, bs)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.BudgetsView(rep))
}
