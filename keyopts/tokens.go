package keyopts

import (
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/store"
)

// MaxTokenLimit is the highest per-key token limit, per minute or per day.
const MaxTokenLimit = 1_000_000_000_000

// Field names of the token limits, as on the wire.
const (
	FieldTPMLimit     = "tpm_limit"
	FieldTokensPerDay = "tokens_per_day"
)

// TokenLimit checks a per-key token limit of field (FieldTPMLimit or
// FieldTokensPerDay) given as a number: 1–MaxTokenLimit.
func TokenLimit(field string, n int64) (*int64, error) {
	unit := tokenUnit(field)
	if n < 1 {
		return nil, fieldErr(field, "must be at least 1 token per %s, or Off; got %d", unit, n)
	}
	if n > MaxTokenLimit {
		return nil, fieldErr(field, "must be at most %d tokens per %s; got %d", int64(MaxTokenLimit), unit, n)
	}
	return &n, nil
}

// ParseTokenLimit parses "off" (any case; nil: the plan's default
// applies) or a whole number of tokens, 1–MaxTokenLimit, for field.
func ParseTokenLimit(field, s string) (*int64, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, Off) {
		return nil, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return nil, fieldErr(field, "%s is not a whole number or %q", quote(s), Off)
	}
	return TokenLimit(field, n)
}

func tokenUnit(field string) string {
	if field == FieldTokensPerDay {
		return "day"
	}
	return "minute"
}

// applyTokenLimits applies p's token limits to k, adding each invalid
// one's error.
func applyTokenLimits(k *store.Key, p Patch, add func(error)) {
	if p.TPMLimit != nil {
		n, err := ParseTokenLimit(FieldTPMLimit, *p.TPMLimit)
		if err != nil {
			add(err)
		}
		k.TPMLimit = n
	}
	if p.TokensPerDay != nil {
		n, err := ParseTokenLimit(FieldTokensPerDay, *p.TokensPerDay)
		if err != nil {
			add(err)
		}
		k.TokensPerDay = n
	}
}
