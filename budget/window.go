// Package budget owns spend budgets on the request path: the calendar
// windows a budget counts spending in, and the holds a request takes under
// every budget that applies to it (its key's and its account's), served
// from this replica's leases of each budget window by a balance.Leaser,
// exactly as the balance is.
package budget

import (
	"fmt"
	"time"
)

// Period is how long a budget's window lasts.
type Period string

// The periods. Day, week (from Monday) and month are calendar windows in
// the account's time zone; total is the owner's whole life.
const (
	Day   Period = "day"
	Week  Period = "week"
	Month Period = "month"
	Total Period = "total"
)

// Periods lists every period, shortest first.
var Periods = []Period{Day, Week, Month, Total}

// ParsePeriod reads a period's name.
func ParsePeriod(s string) (Period, error) {
	for _, p := range Periods {
		if string(p) == s {
			return p, nil
		}
	}
	return "", fmt.Errorf("budget: unknown period %q (want day, week, month or total)", s)
}

// Window is the window of period p that holds now, in loc: [Start, End).
// A total window starts at the Unix epoch and never ends (End is zero).
// Calendar windows start at midnight in loc, so a day across a daylight
// saving change lasts 23 or 25 hours.
func Window(p Period, now time.Time, loc *time.Location) (start, end time.Time) {
	if loc == nil {
		loc = time.UTC
	}
	t := now.In(loc)
	y, m, d := t.Date()
	switch p {
	case Day:
		start = time.Date(y, m, d, 0, 0, 0, 0, loc)
		end = time.Date(y, m, d+1, 0, 0, 0, 0, loc)
	case Week:
		back := (int(t.Weekday()) + 6) % 7 // days since Monday
		start = time.Date(y, m, d-back, 0, 0, 0, 0, loc)
		end = time.Date(y, m, d-back+7, 0, 0, 0, 0, loc)
	case Month:
		start = time.Date(y, m, 1, 0, 0, 0, 0, loc)
		end = time.Date(y, m+1, 1, 0, 0, 0, 0, loc)
	default:
		return time.Unix(0, 0).UTC(), time.Time{}
	}
	return start.UTC(), end.UTC()
}

// LoadZone is the time zone named (an IANA name such as America/New_York);
// "" is UTC. The host's own zone ("Local") is refused: windows must not
// depend on where a replica runs.
func LoadZone(name string) (*time.Location, error) {
	if name == "" {
		return time.UTC, nil
	}
	if name == "Local" {
		return nil, fmt.Errorf("budget: time zone %q: name an IANA zone such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("budget: time zone %q: %w", name, err)
	}
	return loc, nil
}
