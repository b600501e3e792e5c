package dashboard

import (
	"fmt"
	"net/http"
)

// editKey shows the edit form filled with the key's options and budgets.
func (d *Dashboard) editKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	rep, err := d.manage.KeyBudgets(r.Context(), d.actor(r, s), k.ID)
	if err != nil {
		return fmt.Errorf("key budgets: %w", err)
	}
	row := keyView(k, d.now())
	f := keyFormOf(k)
	f.Budgets = budgetFieldsOf(budgetsOfReport(rep))
	d.renderKeyForm(w, r, s, http.StatusOK, &row, f, nil)
	return nil
}
