package keyopts

import (
	"strings"
	"time"
)

// Never is the text for a key that does not expire.
const Never = "never"

// DateLayout is how an expiry date is written.
const DateLayout = "2006-01-02"

// ParseExpiryDate parses "never" (any case; nil) or a calendar date
// "YYYY-MM-DD", which means the end of that day in UTC: the returned instant
// is the next day's 00:00:00Z, from which on the key is expired. It does not
// look at the clock; use it when editing an existing key.
func ParseExpiryDate(s string) (*time.Time, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, Never) {
		return nil, nil
	}
	d, err := time.Parse(DateLayout, s)
	if err != nil {
		return nil, fieldErr(FieldExpiresAt, "%s is not a date (YYYY-MM-DD) or %q", quote(s), Never)
	}
	end := d.AddDate(0, 0, 1)
	if end.Year() > 9999 {
		return nil, fieldErr(FieldExpiresAt, "%s is too far in the future", quote(s))
	}
	return &end, nil
}

// ParseExpiry is ParseExpiryDate for a new key: a date whose end is not after
// now is rejected, since the key would be born expired. Today is allowed.
func ParseExpiry(s string, now time.Time) (*time.Time, error) {
	t, err := ParseExpiryDate(s)
	if err != nil || t == nil {
		return t, err
	}
	if !t.After(now) {
		return nil, fieldErr(FieldExpiresAt, "%s has already ended (dates are whole days in UTC); pick a later date or %q",
			t.AddDate(0, 0, -1).Format(DateLayout), Never)
	}
	return t, nil
}

// ExpiryDate is ParseExpiryDate's inverse: the calendar date an expiry was
// entered as. An expiry at a UTC midnight is the end of the day before, so
// 2026-01-02T00:00Z is "2026-01-01". ok is false for an instant that is not
// a UTC midnight (set by other means), which no date gives; date is then
// the instant's own UTC date.
func ExpiryDate(t time.Time) (date string, ok bool) {
	u := t.UTC()
	if u.Hour() != 0 || u.Minute() != 0 || u.Second() != 0 || u.Nanosecond() != 0 {
		return u.Format(DateLayout), false
	}
	return u.AddDate(0, 0, -1).Format(DateLayout), true
}
