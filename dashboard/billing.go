package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The Billing page: the account's balance, what is held for requests in
// flight, its history a day at a time and its credits, read from the
// management service's balance history (the API's
// GET /api/v1/accounts/{id}/balance). Read-only: where to add
// credit is the operator's setting (dashboard.add_credit).

// billingWindows are the spans the page shows; 30 days by default.
var billingWindows = []struct {
	Value, Label string
	Days         int
}{{"7d", "7 days", 7}, {"30d", "30 days", 30}, {"90d", "90 days", 90}}

type billingPage struct {
	Balance, Reserved, Available string
	// Low is set when the balance is $0 or less: requests are refused.
	Low bool
	AddCredit
	Window  string
	Windows any
	Days    []billingDay
	Credits []billingCredit
	// Error words a range the service refused (too many credits).
	Error string
}

// AddCredit is where the operator says credit is added: a link or a
// sentence (config dashboard.add_credit).
type AddCredit struct {
	AddCreditURL, AddCreditText string
}

type billingDay struct {
	Day                      string
	Credited, Spent, Balance string
}

type billingCredit struct {
	When          shownTime
	Kind          string
	Amount, After string
}

// addCredit is the operator's setting, as pages show it.
func (d *Dashboard) addCredit() AddCredit {
	c := d.config().Dashboard
	if u := c.AddCreditURL(); u != "" {
		return AddCredit{AddCreditURL: u}
	}
	return AddCredit{AddCreditText: c.AddCredit}
}

func (d *Dashboard) billing(w http.ResponseWriter, r *http.Request, s *session) error {
	win := billingWindows[1]
	for _, bw := range billingWindows {
		if bw.Value == r.URL.Query().Get("window") {
			win = bw
		}
	}
	to := d.now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	h, err := d.manage.BalanceHistoryOf(r.Context(), d.actor(r, s),
		manage.UsageRequest{AccountID: s.account.ID, From: to.AddDate(0, 0, -win.Days), To: to, Group: "day"})
	page := billingPage{Window: win.Value, Windows: billingWindows, AddCredit: d.addCredit()}
	var oe oaierror.Error
	switch {
	case errors.As(err, &oe) && oe.Status == http.StatusBadRequest:
		page.Error = oe.Message
		h.Account = s.account
	case err != nil:
		return fmt.Errorf("balance history: %w", err)
	}
	page.Balance, page.Reserved, page.Available = usd(h.Account.Balance), usd(h.Account.Reserved), usd(h.Account.Balance-h.Account.Reserved)
	page.Low = h.Account.Balance <= 0
	for i := len(h.Buckets) - 1; i >= 0; i-- { // newest first
		b := h.Buckets[i]
		page.Days = append(page.Days, billingDay{Day: b.Start.UTC().Format(dateLayout), Credited: signedUSD(b.Credited),
			Spent: usd(b.Spent), Balance: usd(b.Closing)})
	}
	for i := len(h.Changes) - 1; i >= 0; i-- {
		c := h.Changes[i]
		page.Credits = append(page.Credits, billingCredit{When: timeShown(&c.At, func(t time.Time) string { return t.UTC().Format(timeLayout) }),
			Kind: creditKind(c.Kind), Amount: signedUSD(c.Amount), After: usd(c.Balance)})
	}
	d.render(w, r, http.StatusOK, "billing", s, "Billing", page)
	return nil
}

// signedUSD is usd with a + before a credit; nothing is "—".
func signedUSD(n money.Nanos) string {
	switch {
	case n == 0:
		return "—"
	case n > 0:
		return "+" + usd(n)
	}
	return usd(n)
}

func creditKind(kind string) string {
	switch kind {
	case store.BalanceOpening:
		return "Opening balance"
	case store.BalanceCredit:
		return "Credit"
	}
	return kind
}
