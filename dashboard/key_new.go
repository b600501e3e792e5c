package dashboard

import (
	"net/http"
)

// newKey shows the create form with its defaults.
func (d *Dashboard) newKey(w http.ResponseWriter, r *http.Request, s *session) error {
	d.renderKeyForm(w, r, s, http.StatusOK, nil, newKeyForm(), nil)
	return nil
}

// renderKeyForm shows the create form (k nil) or the edit form of k, with
// the values f and the errors beside their fields.
func (d *Dashboard) renderKeyForm(w http.ResponseWriter, r *http.Request, s *session, status int, k *keyRow, f keyForm, errs fieldErrors) {
	page := keyFormPage{
		Key:    k,
		Action: "/keys",
		Form:   f,
		Errors: errs,
		Models: modelChoices(d.config(), s.account.Plan, f),
		Today:  d.now().UTC().Format(dateLayout),
	}
	title := "Create key"
	if k != nil {
		page.Action = "/keys/" + k.ID
		title = "Edit key"
	}
	d.render(w, r, status, "key_form", s, title, page)
}
