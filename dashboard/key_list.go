package dashboard

import (
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/store"
)

// keyListPage is the account and its keys.
type keyListPage struct {
	Email   string
	Plan    string
	Balance string
	Keys    []keyRow
	// Saved is set after a key was saved (its row is marked).
	Saved bool
	// Deleted is set after a key was deleted.
	Deleted bool
}

// keyRow is one key as the list shows it.
type keyRow struct {
	ID          string
	Description string
	Hint        string
	Status      string // Enabled, Disabled or Expired
	Enabled     bool
	RateLimit   string
	IPs         string
	Models      string
	ExpiresAt   string
	CreatedAt   string
	// CreatedDate is the day of CreatedAt, which the list shows; CreatedAtISO is for machines.
	CreatedDate  string
	CreatedAtISO string
	LastUsed     string
	JustSaved    bool
}

// listKeys shows the account and the table of its keys.
func (d *Dashboard) listKeys(w http.ResponseWriter, r *http.Request, s *session) error {
	keys, err := d.store.ListKeys(r.Context(), s.account.ID)
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	now := d.now()
	saved := r.URL.Query().Get("saved")
	page := keyListPage{
		Email:   s.account.Email,
		Plan:    s.account.Plan,
		Balance: usd(s.account.Balance),
		Keys:    make([]keyRow, 0, len(keys)),
		Deleted: r.URL.Query().Has("deleted"),
	}
	for _, k := range keys {
		row := keyView(k, now)
		if saved != "" && k.ID == saved {
			row.JustSaved = true
			page.Saved = true
		}
		page.Keys = append(page.Keys, row)
	}
	d.render(w, r, http.StatusOK, "keys", s, "API keys", page)
	return nil
}

func keyView(k store.Key, now time.Time) keyRow {
	return keyRow{
		ID:           k.ID,
		Description:  k.Description,
		Hint:         k.Hint,
		Status:       statusLabel(k, now),
		Enabled:      k.Enabled,
		RateLimit:    rateLimitLabel(k.RateLimitRPM),
		IPs:          ipsLabel(k.IPRestrictions),
		Models:       modelsLabel(k.Models),
		ExpiresAt:    expiryLabel(k.ExpiresAt),
		CreatedAt:    k.CreatedAt.UTC().Format(timeLayout),
		CreatedDate:  k.CreatedAt.UTC().Format(dateLayout),
		CreatedAtISO: k.CreatedAt.UTC().Format(time.RFC3339),
		LastUsed:     timeLabel(k.LastUsedAt),
	}
}
