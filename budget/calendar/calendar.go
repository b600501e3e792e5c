// Package calendar is the calendar of spend budgets: the window of each
// period that holds at an instant, in an account's time zone, and how a
// change of that zone moves the windows (it never starts a window early:
// every window begun keeps its bounds, and the new zone's windows start
// where it ends). It is a leaf, so that the store, which changes a zone,
// and the request path, which holds in windows, compute windows alike.
package calendar

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	_ "time/tzdata" // account time zones do not depend on the host's zoneinfo
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
	return "", fmt.Errorf("calendar: unknown period %q (want day, week, month or total)", s)
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
		return nil, fmt.Errorf("calendar: time zone %q: name an IANA zone such as Europe/Paris", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("calendar: time zone %q: %w", name, err)
	}
	return loc, nil
}

// Span is a window's bounds: [Start, End).
type Span struct {
	Start, End time.Time
}

// Zone is the calendar of an account's budgets: the windows of its time
// zone, except that each window current when the zone last changed (Kept,
// by period) lasts to its end, and the zone's first window of that period
// starts there. So windows follow one another without gap or overlap
// across any sequence of changes (docs/decisions.md).
type Zone struct {
	// Name is the time zone's IANA name ("UTC" unless set).
	Name string
	// Loc is the zone Name names; nil is UTC (see Load).
	Loc *time.Location
	// Kept are the windows a change of zone left in force, by period.
	Kept map[Period]Span
}

// Load is z with Loc set from Name. A name this build does not know gives
// UTC windows, and the error says so.
func (z Zone) Load() (Zone, error) {
	loc, err := LoadZone(z.Name)
	if err != nil {
		loc = time.UTC
	}
	z.Loc = loc
	return z, err
}

// Window is the window of period p that holds at now under z: the kept
// window while it lasts, then the zone's windows, the first of them
// starting where the kept one ended. (An instant before the kept window,
// which only a clock behind the change's asks for, gets the zone's window
// cut at the kept one's start.)
func (z Zone) Window(p Period, now time.Time) (start, end time.Time) {
	start, end = Window(p, now, z.Loc)
	k, kept := z.Kept[p]
	switch {
	case !kept:
	case now.Before(k.Start):
		if end.After(k.Start) {
			end = k.Start
		}
	case now.Before(k.End):
		return k.Start, k.End
	case start.Before(k.End):
		start = k.End
	}
	return start, end
}

// Change is z moved to the zone name (loaded as loc) at now: the window of
// each calendar period current at now is kept to its end, and the new
// zone's windows start from there. A window still current that an earlier
// change kept stays kept; a kept window that no longer bounds anything is
// dropped.
func (z Zone) Change(now time.Time, name string, loc *time.Location) Zone {
	next := Zone{Name: name, Loc: loc, Kept: map[Period]Span{}}
	for _, p := range []Period{Day, Week, Month} {
		start, end := z.Window(p, now)
		if s, e := Window(p, now, loc); s.Equal(start) && e.Equal(end) {
			continue // the new zone's window is this one: nothing to keep
		}
		next.Kept[p] = Span{Start: start, End: end}
	}
	return next
}

// KeptText writes Kept as stored: "day:<start>:<end>" in Unix seconds, one
// per period, separated by spaces; "" for none.
func (z Zone) KeptText() string {
	var parts []string
	for _, p := range Periods {
		if k, ok := z.Kept[p]; ok {
			parts = append(parts, fmt.Sprintf("%s:%d:%d", p, k.Start.Unix(), k.End.Unix()))
		}
	}
	return strings.Join(parts, " ")
}

// ParseKept reads KeptText; a part it cannot read is left out.
func ParseKept(s string) map[Period]Span {
	out := map[Period]Span{}
	for _, f := range strings.Fields(s) {
		parts := strings.Split(f, ":")
		if len(parts) != 3 {
			continue
		}
		p, err := ParsePeriod(parts[0])
		start, err1 := strconv.ParseInt(parts[1], 10, 64)
		end, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err != nil || err1 != nil || err2 != nil || p == Total {
			continue
		}
		out[p] = Span{Start: time.Unix(start, 0).UTC(), End: time.Unix(end, 0).UTC()}
	}
	return out
}
