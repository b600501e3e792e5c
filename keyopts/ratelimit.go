package keyopts

import (
	"strconv"
	"strings"
)

// MaxRPM is the highest per-key rate limit, in requests per minute.
const MaxRPM = 1_000_000

// Off is the text that turns a key's rate limit off (the plan's default
// applies).
const Off = "off"

// RateLimit checks a per-key limit given as a number: 1–MaxRPM.
func RateLimit(n int) (*int, error) {
	if n < 1 {
		return nil, fieldErr(FieldRateLimitRPM, "must be at least 1 request per minute, or Off; got %d", n)
	}
	if n > MaxRPM {
		return nil, fieldErr(FieldRateLimitRPM, "must be at most %d requests per minute; got %d", MaxRPM, n)
	}
	return &n, nil
}

// ParseRateLimit parses "off" (any case; nil: the plan's default applies) or a
// whole number of requests per minute, 1–MaxRPM.
func ParseRateLimit(s string) (*int, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, Off) {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return nil, fieldErr(FieldRateLimitRPM, "%s is not a whole number or %q", quote(s), Off)
	}
	return RateLimit(n)
}
