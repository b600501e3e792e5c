package dashboard

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// Rotating a key's secret: a new secret, shown once (Post/Redirect/Get, as
// a new key's), the old one working on for the grace period chosen (none,
// an hour, a day or a week) so that deployments can move to the new one.

// rotationGraces are the grace periods offered. A day is chosen unless the
// visitor picks another: long enough for a deployment to move to the new
// secret wherever its people are, short enough that a leaked secret does
// not work on for long (docs/dashboard.md). Cutting the old secret at once
// must be chosen.
var rotationGraces = []struct {
	Value   string
	Label   string
	D       time.Duration
	Default bool
}{
	{"0", "None: the old secret stops at once (when it has leaked)", 0, false},
	{"3600", "1 hour", time.Hour, false},
	{"86400", "1 day", 24 * time.Hour, true},
	{"604800", "7 days", 7 * 24 * time.Hour, false},
}

type keyRotatePage struct {
	Key    keyRow
	Graces any
}

// confirmRotateKey asks for the grace period.
func (d *Dashboard) confirmRotateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	d.render(w, r, http.StatusOK, "key_rotate", s, "Rotate key", keyRotatePage{Key: keyView(k, d.now()), Graces: rotationGraces})
	return nil
}

// rotateKey gives the key a new secret through the management service
// (audited as key.rotate) and shows it once.
func (d *Dashboard) rotateKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	grace := time.Duration(-1)
	for _, g := range rotationGraces {
		if r.PostForm.Get("grace") == g.Value {
			grace = g.D
		}
	}
	if grace < 0 {
		return &pageError{status: http.StatusBadRequest, title: "Choose a grace period", message: "Choose how long the old secret keeps working, from the list."}
	}
	_, secret, until, err := d.manage.RotateKey(r.Context(), d.actor(r, s), k.ID, grace)
	if err != nil {
		return fmt.Errorf("rotate key: %w", err)
	}
	d.log.InfoContext(r.Context(), "dashboard: key rotated", "key", k.ID, "account", s.account.ID, "grace", grace)
	path := "/keys/" + k.ID + "/rotated"
	if err := d.setFlash(w, r, s, path, secret); err != nil {
		return fmt.Errorf("seal the secret for its page: %w", err)
	}
	if until != nil {
		path += "?old_until=" + strconv.FormatInt(until.Unix(), 10)
	}
	http.Redirect(w, r, path, http.StatusSeeOther)
	return nil
}

// showRotatedKey shows the rotated key's new secret, once.
func (d *Dashboard) showRotatedKey(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	row := keyView(k, d.now())
	secret := d.takeFlash(w, r, s)
	page := keyCreatedPage{Key: row, Secret: secret, Rotated: true, Snippets: d.snippetsFor(r, secret, d.firstModel(s.account.Plan, k.Models))}
	if sec, err := strconv.ParseInt(r.URL.Query().Get("old_until"), 10, 64); err == nil && sec > 0 {
		until := time.Unix(sec, 0)
		page.OldUntil = timeShown(&until, func(t time.Time) string { return t.UTC().Format(timeLayout) })
	}
	d.render(w, r, http.StatusOK, "key_created", s, "Key rotated", page)
	return nil
}
