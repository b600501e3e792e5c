package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/store"
)

// updateKey saves the fields the edit form changed through the management
// service, which checks them, then the budgets if the form changed them;
// or shows the form again with its errors and nothing saved. The secret
// cannot be edited.
func (d *Dashboard) updateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	f := parseKeyForm(r.PostForm)
	now := d.now()
	if date := f.pastExpiry(k, now); date != "" && r.PostForm.Get("confirm_past_expiry") != date {
		row := keyView(k, now)
		errs := fieldErrors{keyopts.FieldExpiresAt: "The key works until the end of " + date +
			" (UTC), which has passed: saving this date disables the key now, and its requests are refused from then on. " +
			"Confirm below, or pick a later date."}
		d.renderKeyFormConfirm(w, r, s, &row, f, errs, date)
		return nil
	}
	errs, err := d.saveKeyEdit(r, s, k, f)
	if err != nil {
		return err
	}
	if errs != nil {
		row := keyView(k, now)
		d.renderKeyForm(w, r, s, http.StatusUnprocessableEntity, &row, f, errs)
		return nil
	}
	redirectSaved(w, r, k.ID)
	return nil
}

// saveKeyEdit saves the key's changed options, then its budgets unless
// the form leaves them as they are (no write, no audit entry); or saves
// nothing and returns the form's errors. The budgets are checked in full
// (as SetKeyBudgets checks them) before the key is written: once it is,
// only a database failure can keep them from it.
func (d *Dashboard) saveKeyEdit(r *http.Request, s *session, k store.Key, f keyForm) (fieldErrors, error) {
	ctx, a := r.Context(), d.actor(r, s)
	rep, err := d.manage.KeyBudgets(ctx, a, k.ID)
	if err != nil {
		return nil, fmt.Errorf("key budgets: %w", err)
	}
	bs, budgetErrs := checkFormBudgets(f.Budgets, rep.Budgets)
	// Only the fields changed on the form are sent: an edit made meanwhile
	// elsewhere to another field is kept.
	was := keyFormOf(k)
	if err = d.checkFormTeam(r, s, f); err == nil {
		if f.mismatched() || len(budgetErrs) > 0 {
			err = d.manage.CheckKey(ctx, a, "", k.ID, f.patch(&was))
		} else {
			err = d.moveFormKey(r, s, k.ID, k.TeamID, f.Team, func() error {
				_, err := d.manage.UpdateKey(ctx, a, k.ID, "", f.patch(&was))
				return err
			})
		}
	}
	errs, err := d.formErrors(f, err)
	if err != nil {
		return nil, fmt.Errorf("update key: %w", err)
	}
	if errs = withErrors(errs, budgetErrs); errs != nil || sameBudgets(bs, budgetsOfReport(rep)) {
		return errs, nil
	}
	if _, err := d.manage.SetKeyBudgets(ctx, a, k.ID, bs); err != nil {
		return nil, fmt.Errorf("set key budgets: %w", err)
	}
	return nil, nil
}

// pastExpiry is the date the form sets as the key's expiry when that date
// has already ended while the key is not yet expired by its own: saving it
// would disable the key at once, which the form asks to confirm. "" when
// the form changes no expiry, or not to such a date.
func (f keyForm) pastExpiry(k store.Key, now time.Time) string {
	if f.ExpiresMode != expiresOn || f.ExpiresAt == "" {
		return ""
	}
	end, err := keyopts.ParseExpiryDate(f.ExpiresAt)
	if err != nil || end == nil || end.After(now) {
		return "" // not a date (formErrors says so), or one still to end
	}
	if k.ExpiresAt != nil && !k.ExpiresAt.After(now) {
		return "" // already expired: the date changes nothing now
	}
	return f.ExpiresAt
}
