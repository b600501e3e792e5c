package keyopts

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
)

// MaxIPRestrictions is the most entries a key's IP restrictions may have.
const MaxIPRestrictions = 100

// ParseIPRestrictions parses IP restriction entries into prefixes, the form a
// matcher needs. Each entry is trimmed and must be one of:
//
//   - an IPv4 or IPv6 address: it becomes a /32 or /128 prefix;
//   - a CIDR whose host bits are zero ("10.0.0.0/8"). A CIDR with host bits
//     set ("10.0.0.1/8") is rejected rather than silently widened or
//     narrowed, since either guess could be wrong; the message suggests the
//     network.
//
// IPv4-mapped IPv6 entries ("::ffff:10.0.0.1", "::ffff:10.0.0.0/104") become
// their IPv4 form; a matcher must likewise Unmap the client's address before
// testing it. Zones ("fe80::1%eth0") are rejected. Duplicates (also
// "10.0.0.1" and "10.0.0.1/32") are dropped, keeping the first; after that
// at most MaxIPRestrictions entries may remain. An empty list means no
// restriction.
//
// Every bad entry is reported at once, in one error (the first ten named).
func ParseIPRestrictions(entries []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(entries))
	seen := make(map[netip.Prefix]bool, len(entries))
	var bad []string
	for i, e := range entries {
		p, err := parseIPEntry(i, strings.TrimSpace(e))
		if err != nil {
			if fe := (*FieldError)(nil); errors.As(err, &fe) {
				bad = append(bad, fe.Message)
			} else {
				bad = append(bad, err.Error())
			}
			continue
		}
		if seen[p] {
			continue
		}
		seen[p] = true
		out = append(out, p)
	}
	switch n := len(bad); {
	case n > 10:
		return nil, fieldErr(FieldIPRestrictions, "%s; and %d more", strings.Join(bad[:10], "; "), n-10)
	case n > 0:
		return nil, fieldErr(FieldIPRestrictions, "%s", strings.Join(bad, "; "))
	}
	if len(out) > MaxIPRestrictions {
		return nil, fieldErr(FieldIPRestrictions, "has %d distinct entries; at most %d are allowed", len(out), MaxIPRestrictions)
	}
	return out, nil
}

// IPRestrictions is ParseIPRestrictions returning each entry in canonical
// text, the form that is stored: an address alone for a single address
// ("10.0.0.1", "2001:db8::1"), otherwise "network/bits". The result is never
// nil.
func IPRestrictions(entries []string) ([]string, error) {
	ps, err := ParseIPRestrictions(entries)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		if p.IsSingleIP() {
			out[i] = p.Addr().String()
		} else {
			out[i] = p.String()
		}
	}
	return out, nil
}

func parseIPEntry(i int, s string) (netip.Prefix, error) {
	if s == "" {
		return netip.Prefix{}, fieldErr(FieldIPRestrictions, "entry %d is empty", i+1)
	}
	notIP := func() error {
		return fieldErr(FieldIPRestrictions, "%s is not an IPv4/IPv6 address or CIDR", quote(s))
	}
	if strings.Contains(s, "%") {
		if _, err := netip.ParseAddr(s); err == nil {
			return netip.Prefix{}, fieldErr(FieldIPRestrictions, "%s has a zone; zones are not allowed", quote(s))
		}
		return netip.Prefix{}, notIP()
	}
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, notIP()
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, notIP()
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fieldErr(FieldIPRestrictions, "%s has host bits set; did you mean %q?", quote(s), m.String())
	}
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p, nil
}

// maxQuoted bounds how much of a user's input an error message repeats.
const maxQuoted = 64

// quote quotes s for an error message, cut short if it is long.
func quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	cut := maxQuoted
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "…"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
