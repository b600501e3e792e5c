// Package budget owns spend budgets on the request path: the calendar
// windows a budget counts spending in (package calendar), and the holds a
// request takes under every budget that applies to it (its key's, its
// team's and its account's), served from this replica's leases of each budget window by a
// balance.Leaser, exactly as the balance is.
package budget

import (
	"time"

	"github.com/tollgate/tollgate/budget/calendar"
)

// Period is how long a budget's window lasts (calendar.Period).
type Period = calendar.Period

// The periods. Day, week (from Monday) and month are calendar windows in
// the account's time zone; total is the owner's whole life.
const (
	Day   = calendar.Day
	Week  = calendar.Week
	Month = calendar.Month
	Total = calendar.Total
)

// Periods lists every period, shortest first.
var Periods = calendar.Periods

// ParsePeriod reads a period's name.
func ParsePeriod(s string) (Period, error) { return calendar.ParsePeriod(s) }

// Window is the window of period p that holds at now in loc, as if the
// zone never changed (calendar.Window); Zone.Window is the account's.
func Window(p Period, now time.Time, loc *time.Location) (start, end time.Time) {
	return calendar.Window(p, now, loc)
}

// LoadZone is the time zone named (calendar.LoadZone).
func LoadZone(name string) (*time.Location, error) { return calendar.LoadZone(name) }
