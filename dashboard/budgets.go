package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Spend budgets: a key's (/keys/{id}/budgets) and the account's own
// (/budgets), each a page that shows every budget's spend against its
// amount and its reset, and a form of one amount per period; the key page
// and the key list show the same figures, compactly.

// budgetRow is one budget as the pages show it.
type budgetRow struct {
	Period, Amount, Spent, Resets string
	// Percent is spent over amount, 0–100, for the meter.
	Percent int
}

// budgetField is one period's amount in the form ("" for none).
type budgetField struct {
	Period, Label, Amount string
}

// budgetsPage is the budgets page of a key or of the account.
type budgetsPage struct {
	Key      *keyRow // nil: the account's own budgets
	Action   string
	Timezone string
	Rows     []budgetRow
	Fields   []budgetField
	Error    string
	Saved    bool
}

var periodLabels = map[string]string{"day": "Per day", "week": "Per week (from Monday)", "month": "Per month", "total": "In total"}

// budgetRows are a report's budgets as rows.
func budgetRows(bs []manage.BudgetStatus) []budgetRow {
	rows := make([]budgetRow, 0, len(bs))
	for _, b := range bs {
		r := budgetRow{Period: b.Period, Amount: usd(b.Amount), Spent: usd(b.Spent), Resets: "never"}
		if !b.ResetsAt.IsZero() {
			r.Resets = b.ResetsAt.UTC().Format("2006-01-02 15:04 UTC")
		}
		if b.Amount > 0 {
			r.Percent = int(min(100, b.Spent*100/b.Amount))
		} else {
			r.Percent = 100
		}
		rows = append(rows, r)
	}
	return rows
}

// budgetMeter is the key list's compact figure: the fullest budget's
// spend over its amount and period ("" for a key without budgets).
func budgetMeter(bs []manage.BudgetStatus) string {
	var fullest *manage.BudgetStatus
	for i, b := range bs {
		if fullest == nil || b.Spent*fullest.Amount > fullest.Spent*b.Amount {
			fullest = &bs[i]
		}
	}
	if fullest == nil {
		return ""
	}
	return fmt.Sprintf("%s / %s %s", usd(fullest.Spent), usd(fullest.Amount), fullest.Period)
}

// budgetMeters are the key list's figures, by key id.
func (d *Dashboard) budgetMeters(ctx context.Context, a manage.Actor, accountID string) (map[string]string, error) {
	all, err := d.manage.KeyBudgetsOf(ctx, a, accountID)
	if err != nil {
		return nil, fmt.Errorf("key budgets: %w", err)
	}
	out := make(map[string]string, len(all))
	for id, bs := range all {
		out[id] = budgetMeter(bs)
	}
	return out, nil
}

// keyBudgetRows are a key's budgets for its page.
func (d *Dashboard) keyBudgetRows(ctx context.Context, a manage.Actor, keyID string) ([]budgetRow, error) {
	rep, err := d.manage.KeyBudgets(ctx, a, keyID)
	if err != nil {
		return nil, fmt.Errorf("key budgets: %w", err)
	}
	return budgetRows(rep.Budgets), nil
}

// fill sets the page's rows, and its form from the budgets unless the
// form is being shown again.
func (p *budgetsPage) fill(rep manage.BudgetReport, keepForm bool) {
	p.Rows, p.Timezone = budgetRows(rep.Budgets), rep.Timezone
	if keepForm {
		return
	}
	p.Fields = nil
	for _, period := range budget.Periods {
		f := budgetField{Period: string(period), Label: periodLabels[string(period)]}
		for _, b := range rep.Budgets {
			if b.Period == string(period) {
				f.Amount = b.Amount.String()
			}
		}
		p.Fields = append(p.Fields, f)
	}
}

// formBudgets reads the budgets page's amounts (amount_day, ...): a blank
// one is no budget. Each kept period keeps its alert thresholds.
func formBudgets(r *http.Request, rep manage.BudgetReport) ([]store.Budget, []budgetField, error) {
	fields := readBudgetFields(r.PostForm, "amount_")
	out, errs := fieldBudgets(fields, rep.Budgets)
	var bad error
	for _, f := range fields {
		if msg := errs[f.Period]; msg != "" {
			bad = errors.Join(bad, errors.New(msg))
		}
	}
	return out, fields, bad
}

// readBudgetFields reads the amount typed for each period, in the field
// named prefix+period, trimmed.
func readBudgetFields(v url.Values, prefix string) []budgetField {
	fields := make([]budgetField, 0, len(budget.Periods))
	for _, period := range budget.Periods {
		p := string(period)
		fields = append(fields, budgetField{Period: p, Label: periodLabels[p], Amount: strings.TrimSpace(v.Get(prefix + p))})
	}
	return fields
}

// fieldBudgets are the budgets the fields ask for (a blank amount is no
// budget), each keeping the alert thresholds of old's budget of its
// period; and a sentence by period for each amount that is none.
func fieldBudgets(fields []budgetField, old []manage.BudgetStatus) ([]store.Budget, map[string]string) {
	var out []store.Budget
	errs := map[string]string{}
	for _, f := range fields {
		if f.Amount == "" {
			continue
		}
		amount, err := money.ParseUSD(strings.TrimPrefix(f.Amount, "$"))
		if err != nil || amount < 0 {
			errs[f.Period] = fmt.Sprintf("%s: %q is not an amount in dollars, such as 25 or 12.50.", f.Label, f.Amount)
			continue
		}
		b := store.Budget{Period: f.Period, Amount: amount}
		for _, o := range old {
			if o.Period == f.Period {
				b.Thresholds = o.Thresholds
			}
		}
		out = append(out, b)
	}
	return out, errs
}

// keyBudgets shows a key's budgets and their form.
func (d *Dashboard) keyBudgets(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	rep, err := d.manage.KeyBudgets(r.Context(), d.actor(r, s), k.ID)
	if err != nil {
		return fmt.Errorf("key budgets: %w", err)
	}
	row := keyView(k, d.now())
	page := budgetsPage{Key: &row, Action: "/keys/" + k.ID + "/budgets", Saved: r.URL.Query().Has("saved")}
	page.fill(rep, false)
	d.render(w, r, http.StatusOK, "budgets", s, "Budgets of a key", page)
	return nil
}

// setKeyBudgets saves a key's budgets from the form.
func (d *Dashboard) setKeyBudgets(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	ctx, a := r.Context(), d.actor(r, s)
	rep, err := d.manage.KeyBudgets(ctx, a, k.ID)
	if err != nil {
		return fmt.Errorf("key budgets: %w", err)
	}
	bs, fields, bad := formBudgets(r, rep)
	if bad == nil {
		if _, err := d.manage.SetKeyBudgets(ctx, a, k.ID, bs); err != nil {
			bad = refusal(err)
			if bad == nil {
				return fmt.Errorf("set key budgets: %w", err)
			}
		}
	}
	if bad != nil {
		row := keyView(k, d.now())
		page := budgetsPage{Key: &row, Action: "/keys/" + k.ID + "/budgets", Fields: fields, Error: bad.Error()}
		page.fill(rep, true)
		d.render(w, r, http.StatusBadRequest, "budgets", s, "Budgets of a key", page)
		return nil
	}
	http.Redirect(w, r, "/keys/"+k.ID+"/budgets?saved", http.StatusSeeOther)
	return nil
}

// accountBudgets shows the account's own budgets, its time zone and their
// form.
func (d *Dashboard) accountBudgets(w http.ResponseWriter, r *http.Request, s *session) error {
	rep, err := d.manage.AccountBudgets(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return fmt.Errorf("account budgets: %w", err)
	}
	page := budgetsPage{Action: "/budgets", Saved: r.URL.Query().Has("saved")}
	page.fill(rep, false)
	d.render(w, r, http.StatusOK, "budgets", s, "Budgets", page)
	return nil
}

// setAccountBudgets saves the account's own budgets and time zone.
func (d *Dashboard) setAccountBudgets(w http.ResponseWriter, r *http.Request, s *session) error {
	ctx, a := r.Context(), d.actor(r, s)
	rep, err := d.manage.AccountBudgets(ctx, a, s.account.ID)
	if err != nil {
		return fmt.Errorf("account budgets: %w", err)
	}
	bs, fields, bad := formBudgets(r, rep)
	tz := strings.TrimSpace(r.PostForm.Get("timezone"))
	if bad == nil {
		if _, err := d.manage.SetAccountBudgets(ctx, a, s.account.ID, &tz, bs); err != nil {
			bad = refusal(err)
			if bad == nil {
				return fmt.Errorf("set account budgets: %w", err)
			}
		}
	}
	if bad != nil {
		page := budgetsPage{Action: "/budgets", Fields: fields, Error: bad.Error()}
		page.fill(rep, true)
		page.Timezone = tz
		d.render(w, r, http.StatusBadRequest, "budgets", s, "Budgets", page)
		return nil
	}
	http.Redirect(w, r, "/budgets?saved", http.StatusSeeOther)
	return nil
}

// refusal is the message of an input the service refused (nil for any
// other failure).
func refusal(err error) error {
	var oe oaierror.Error
	if errors.As(err, &oe) && oe.Status == http.StatusBadRequest {
		return errors.New(oe.Message)
	}
	return nil
}
