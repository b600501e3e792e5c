package calendar

import (
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
