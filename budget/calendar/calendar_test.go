package calendar

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestWindowsInUTC(t *testing.T) {
	at := time.Date(2026, 11, 25, 13, 30, 0, 0, time.UTC) // a Wednesday
	for _, tc := range []struct {
		p          Period
		start, end time.Time
	}{
		{Day, time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)},
		{Week, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
		{Total, time.Unix(0, 0).UTC(), time.Time{}},
	} {
		start, end := Window(tc.p, at, nil)
		require.Equal(t, tc.start, start, tc.p)
		require.Equal(t, tc.end, end, tc.p)
	}
}

func TestWindowBoundariesAreExact(t *testing.T) {
	mid := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	before, _ := Window(Day, mid.Add(-time.Nanosecond), time.UTC)
	at, _ := Window(Day, mid, time.UTC)
	require.Equal(t, mid.AddDate(0, 0, -1), before, "the last instant of a day is in it")
	require.Equal(t, mid, at, "midnight starts the next")
	sunday := time.Date(2026, 11, 29, 23, 59, 59, 0, time.UTC)
	ws, we := Window(Week, sunday, time.UTC)
	require.Equal(t, time.Monday, ws.Weekday())
	require.Equal(t, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), we, "a Sunday ends its week")
	monday, _ := Window(Week, we, time.UTC)
	require.Equal(t, we, monday, "weeks start on Monday")
	dec31, _ := Window(Month, time.Date(2026, 12, 31, 23, 0, 0, 0, time.UTC), time.UTC)
	jan, janEnd := Window(Month, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC)
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), dec31)
	require.Equal(t, time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), jan)
	require.Equal(t, time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), janEnd)
}

func TestWindowsFollowTheZoneAcrossDaylightSaving(t *testing.T) {
	ny, err := LoadZone("America/New_York")
	require.NoError(t, err)
	// 2026-03-08: clocks go from 02:00 to 03:00 (a 23-hour day).
	start, end := Window(Day, time.Date(2026, 3, 8, 12, 0, 0, 0, ny), ny)
	require.Equal(t, time.Date(2026, 3, 8, 5, 0, 0, 0, time.UTC), start, "midnight EST")
	require.Equal(t, time.Date(2026, 3, 9, 4, 0, 0, 0, time.UTC), end, "midnight EDT")
	require.Equal(t, 23*time.Hour, end.Sub(start))
	// 2026-11-01: clocks go from 02:00 back to 01:00 (a 25-hour day).
	start, end = Window(Day, time.Date(2026, 11, 1, 1, 30, 0, 0, time.UTC).Add(5*time.Hour), ny)
	require.Equal(t, time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), start, "midnight EDT")
	require.Equal(t, time.Date(2026, 11, 2, 5, 0, 0, 0, time.UTC), end, "midnight EST")
	require.Equal(t, 25*time.Hour, end.Sub(start))
	// The week across the November change: Monday 2026-10-26 to Monday 2026-11-02.
	ws, we := Window(Week, time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC), ny)
	require.Equal(t, time.Date(2026, 10, 26, 4, 0, 0, 0, time.UTC), ws)
	require.Equal(t, time.Date(2026, 11, 2, 5, 0, 0, 0, time.UTC), we)
	require.Equal(t, 7*24*time.Hour+time.Hour, we.Sub(ws))
	// March in New York: from midnight EST to midnight EDT.
	ms, me := Window(Month, time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC), ny)
	require.Equal(t, time.Date(2026, 3, 1, 5, 0, 0, 0, time.UTC), ms)
	require.Equal(t, time.Date(2026, 4, 1, 4, 0, 0, 0, time.UTC), me)
	// 23:30 UTC on 2026-11-25 is still the 25th in New York, the 26th in Tokyo.
	tokyo, err := LoadZone("Asia/Tokyo")
	require.NoError(t, err)
	at := time.Date(2026, 11, 25, 23, 30, 0, 0, time.UTC)
	nyStart, _ := Window(Day, at, ny)
	tkStart, _ := Window(Day, at, tokyo)
	require.Equal(t, time.Date(2026, 11, 25, 5, 0, 0, 0, time.UTC), nyStart)
	require.Equal(t, time.Date(2026, 11, 25, 15, 0, 0, 0, time.UTC), tkStart)
}

func TestZonesAndPeriodsAreChecked(t *testing.T) {
	for _, bad := range []string{"Mars/Olympus", "Local", "../etc/passwd"} {
		_, err := LoadZone(bad)
		require.Error(t, err, bad)
	}
	utc, err := LoadZone("")
	require.NoError(t, err)
	require.Equal(t, time.UTC, utc)
	_, err = ParsePeriod("year")
	require.Error(t, err)
	p, err := ParsePeriod("week")
	require.NoError(t, err)
	require.Equal(t, Week, p)
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := LoadZone(name)
	require.NoError(t, err)
	return loc
}

func TestAChangeKeepsEachWindowUnderWayAndTheNewZoneStartsAtItsEnd(t *testing.T) {
	utc := Zone{Name: "UTC", Loc: time.UTC}
	at := time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC) // a Wednesday
	kiritimati := mustZone(t, "Pacific/Kiritimati")      // UTC+14
	z := utc.Change(at, "Pacific/Kiritimati", kiritimati)
	dayEnd := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now        time.Time
		start, end time.Time
	}{
		{at, time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), dayEnd},
		{dayEnd.Add(-time.Nanosecond), time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), dayEnd},
		// Kiritimati's 26th began at 10:00 UTC on the 25th: its first day
		// starts where the UTC day ended, and ends at its midnight.
		{dayEnd, dayEnd, time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)},
		{time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)},
	} {
		start, end := z.Window(Day, tc.now)
		require.Equal(t, tc.start, start, tc.now)
		require.Equal(t, tc.end, end, tc.now)
	}
	ws, we := z.Window(Week, at)
	require.Equal(t, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), ws, "the UTC week under way is kept")
	require.Equal(t, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC), we)
	start, end := z.Window(Total, at)
	require.Equal(t, time.Unix(0, 0).UTC(), start)
	require.True(t, end.IsZero())

	back := z.Change(at.Add(time.Minute), "UTC", time.UTC)
	start, end = back.Window(Day, at.Add(time.Minute))
	require.Equal(t, time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC), start, "a change back keeps the same window")
	require.Equal(t, dayEnd, end)
	require.Empty(t, back.Kept, "whose zone is again the account's: nothing to keep")
	require.Equal(t, z.Kept, ParseKept(z.KeptText()), "Kept is stored as text")
}

// TestWindowsFollowOneAnotherWithoutGapOrOverlapAcrossAnyChanges walks
// time in half hours across random changes of zone: each window holds the
// instant asked about, and the next begins exactly where the last ended.
// So no instant is counted in two windows, and every window in force
// spends at most its budget.
func TestWindowsFollowOneAnotherWithoutGapOrOverlapAcrossAnyChanges(t *testing.T) {
	names := []string{"UTC", "Pacific/Kiritimati", "Etc/GMT+12", "Asia/Kolkata", "America/New_York", "Australia/Adelaide", "Europe/Paris"}
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 20 {
		z := Zone{Name: "UTC", Loc: time.UTC}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(rng.IntN(365*48)) * 30 * time.Minute)
		prev := map[Period]Span{}
		for step := range 24 * 2 * 70 { // 70 days: several weeks and months
			if rng.IntN(40) == 0 {
				name := names[rng.IntN(len(names))]
				z = z.Change(now, name, mustZone(t, name))
				z = Zone{Name: z.Name, Loc: z.Loc, Kept: ParseKept(z.KeptText())} // as stored
			}
			for _, p := range []Period{Day, Week, Month} {
				start, end := z.Window(p, now)
				last, ok := prev[p]
				switch {
				case now.Before(start) || !now.Before(end):
					t.Fatalf("run %d step %d %s: %v not in [%v, %v)", run, step, p, now, start, end)
				case ok && !last.Start.Equal(start) && !last.End.Equal(start):
					t.Fatalf("run %d step %d %s: [%v, %v) does not start where [%v, %v) ended", run, step, p, start, end, last.Start, last.End)
				case ok && last.Start.Equal(start) && !last.End.Equal(end):
					t.Fatalf("run %d step %d %s: [%v, %v) moved its end to %v", run, step, p, last.Start, last.End, end)
				}
				prev[p] = Span{Start: start, End: end}
			}
			now = now.Add(30 * time.Minute)
		}
	}
}
