package keyopts

import (
	"strings"
	"testing"
)

// FuzzParseIPRestrictions checks that no input panics, that what is accepted
// is canonical (parsing the canonical text again gives the same prefixes),
// and that every accepted prefix is masked and unmapped.
func FuzzParseIPRestrictions(f *testing.F) {
	for _, seed := range []string{
		"10.0.0.1", "10.0.0.0/8", "10.0.0.1/8", "10.0.0.300", "2001:db8::1",
		"2001:db8::/32", "::ffff:10.0.0.1", "::ffff:10.0.0.0/104", "::ffff:0:0/95",
		"fe80::1%eth0", "fe80::1%eth0/64", "0.0.0.0/0", "::/0", "", " ", "/", "1.2.3.4/",
		"/24", "1.2.3.4/-1", "1.2.3.4/033", "::1\n10.0.0.1", "\xff", "1.2.3.4/32,5.6.7.8",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		entries := strings.Split(in, "\n")
		ps, err := ParseIPRestrictions(entries)
		if err != nil {
			return
		}
		for _, p := range ps {
			if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() && p.Bits() >= 96 || p.Addr().Zone() != "" {
				t.Fatalf("%q gave non-canonical prefix %v", in, p)
			}
		}
		canon, err := IPRestrictions(entries)
		if err != nil {
			t.Fatalf("IPRestrictions failed where ParseIPRestrictions did not: %v", err)
		}
		again, err := ParseIPRestrictions(canon)
		if err != nil {
			t.Fatalf("canonical text %q does not parse: %v", canon, err)
		}
		if len(again) != len(ps) {
			t.Fatalf("round trip changed %v into %v", ps, again)
		}
		for i := range ps {
			if again[i] != ps[i] {
				t.Fatalf("round trip changed %v into %v", ps, again)
			}
		}
	})
}
