package dashboard

import (
	"net/http"

	"github.com/tollgate/tollgate/manage"
)

// newKey shows the create form with its defaults, and the plan's default
// budgets as its spend budgets.
func (d *Dashboard) newKey(w http.ResponseWriter, r *http.Request, s *session) error {
	if err := d.actor(r, s).Check(manage.OpKeysCreate); err != nil {
		return err // a role that may not make keys is told so before the form
	}
	f := newKeyForm()
	f.Budgets = budgetFieldsOf(planBudgets(d.config(), s.account.Plan))
	d.renderKeyForm(w, r, s, http.StatusOK, nil, f, nil)
	return nil
}

// renderKeyForm shows the create form (k nil) or the edit form of k, with
// the values f and the errors beside their fields.
func (d *Dashboard) renderKeyForm(w http.ResponseWriter, r *http.Request, s *session, status int, k *keyRow, f keyForm, errs fieldErrors) {
	d.renderKeyFormPage(w, r, s, status, keyFormPage{Key: k, Form: f, Errors: errs})
}

// renderKeyFormConfirm shows the edit form of k again, nothing saved,
// asking to confirm the expiry date that has already ended.
func (d *Dashboard) renderKeyFormConfirm(w http.ResponseWriter, r *http.Request, s *session, k *keyRow, f keyForm, errs fieldErrors, date string) {
	d.renderKeyFormPage(w, r, s, http.StatusUnprocessableEntity, keyFormPage{Key: k, Form: f, Errors: errs, ConfirmExpiry: date})
}

// renderKeyFormPage fills in page's action, models, today and budget
// fields, and shows it.
func (d *Dashboard) renderKeyFormPage(w http.ResponseWriter, r *http.Request, s *session, status int, page keyFormPage) {
	page.Action = "/keys"
	page.Models = modelChoices(d.config(), s.account.Plan, page.Form)
	page.Today = d.now().UTC().Format(dateLayout)
	page.Budgets = keyBudgetFields(page.Form, page.Errors)
	page.Timezone = d.accountZone(r, s)
	title := "Create key"
	if page.Key != nil {
		page.Action = "/keys/" + page.Key.ID
		title = "Edit key"
	}
	d.render(w, r, status, "key_form", s, title, page)
}
