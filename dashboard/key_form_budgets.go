package dashboard

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The key form's spend budgets: one amount per period, in fields named
// budget_day, budget_week, budget_month and budget_total (blank: none).
// They are checked with the form's other fields, their errors shown beside
// their own fields, and saved through manage.SetKeyBudgets once the key is
// written. The budgets page (/keys/{id}/budgets) shows their spend.

// budgetFieldPrefix names the key form's amount fields.
const budgetFieldPrefix = "budget_"

// keyBudgetField is one period's amount on the key form and its error.
type keyBudgetField struct {
	budgetField
	Name, Error string
}

func parseBudgetsForm(v url.Values) []budgetField {
	return readBudgetFields(v, budgetFieldPrefix)
}

// budgetFieldsOf shows budgets as the form's fields, one per period.
func budgetFieldsOf(bs []store.Budget) []budgetField {
	fields := readBudgetFields(nil, budgetFieldPrefix)
	for i := range fields {
		for _, b := range bs {
			if b.Period == fields[i].Period {
				fields[i].Amount = b.Amount.String()
			}
		}
	}
	return fields
}

// planBudgets are the budgets CreateKey gives a new key of the plan
// (plans[].default_key_budgets).
func planBudgets(cfg *config.Config, planName string) []store.Budget {
	p, ok := cfg.Plan(planName)
	if !ok {
		return nil
	}
	bs := make([]store.Budget, 0, len(p.DefaultKeyBudgets))
	for _, d := range p.DefaultKeyBudgets {
		bs = append(bs, store.Budget{Period: d.Period, Amount: d.AmountUSD})
	}
	return bs
}

// budgetsOfReport are a report's budgets without their spend.
func budgetsOfReport(rep manage.BudgetReport) []store.Budget {
	bs := make([]store.Budget, 0, len(rep.Budgets))
	for _, b := range rep.Budgets {
		bs = append(bs, b.Budget)
	}
	return bs
}

// checkFormBudgets reads the form's budgets, each keeping the alert
// thresholds of old's budget of its period, and checks them in full as
// manage.SetKeyBudgets would: the budgets, and the form's sentences beside
// the fields it refuses (none when it would accept them).
func checkFormBudgets(fields []budgetField, old []manage.BudgetStatus) ([]store.Budget, fieldErrors) {
	bs, bad := fieldBudgets(fields, old)
	errs := fieldErrors{}
	for period, msg := range bad {
		errs[budgetFieldPrefix+period] = msg
	}
	if len(errs) > 0 {
		return bs, errs
	}
	var oe oaierror.Error
	if err := manage.CheckBudgets(bs); errors.As(err, &oe) {
		var i int
		if _, scanErr := fmt.Sscanf(oe.Param, "budgets[%d]", &i); scanErr == nil && i >= 0 && i < len(bs) {
			errs[budgetFieldPrefix+bs[i].Period] = periodLabels[bs[i].Period] + ": " + budgetSentence(oe.Message)
		} else {
			errs[""] = oe.Message
		}
	}
	return bs, errs
}

// budgetSentence words manage's refusal of an amount in the form's terms.
func budgetSentence(msg string) string {
	if msg == "amount_usd must be from 0 to 1000000." {
		return "an amount is from $0 to $1,000,000."
	}
	return msg
}

// sameBudgets reports whether a and b are the same amounts for the same
// periods (thresholds aside: the form does not change them).
func sameBudgets(a, b []store.Budget) bool {
	if len(a) != len(b) {
		return false
	}
	amounts := map[string]string{}
	for _, x := range a {
		amounts[x.Period] = x.Amount.String()
	}
	for _, y := range b {
		if got, ok := amounts[y.Period]; !ok || got != y.Amount.String() {
			return false
		}
	}
	return true
}

// withErrors adds more to errs: nil when both are empty.
func withErrors(errs, more fieldErrors) fieldErrors {
	if len(more) == 0 {
		return errs
	}
	if errs == nil {
		errs = fieldErrors{}
	}
	maps.Copy(errs, more)
	return errs
}

// keyBudgetFields are the form's budget fields with their errors.
func keyBudgetFields(f keyForm, errs fieldErrors) []keyBudgetField {
	fields := f.Budgets
	if fields == nil {
		fields = budgetFieldsOf(nil)
	}
	out := make([]keyBudgetField, 0, len(fields))
	for _, b := range fields {
		name := budgetFieldPrefix + b.Period
		out = append(out, keyBudgetField{budgetField: b, Name: name, Error: errs[name]})
	}
	return out
}

// accountZone is the time zone of the account's budget windows, as the
// form's hint names it.
func (d *Dashboard) accountZone(r *http.Request, s *session) string {
	rep, err := d.manage.AccountBudgets(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: the account's time zone was not read", "account", s.account.ID, "err", err)
		return "the account's time zone"
	}
	if _, err := budget.LoadZone(rep.Timezone); err != nil || rep.Timezone == "" {
		return "UTC"
	}
	return rep.Timezone
}
