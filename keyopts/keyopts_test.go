package keyopts

import (
	"errors"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"
)

func ptr[T any](v T) *T { return &v }

var now = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

func TestDescription(t *testing.T) {
	tests := []struct {
		name, in, want, wantErr string
	}{
		{name: "trimmed", in: "  ci bot \t", want: "ci bot"},
		{name: "unicode counts runes", in: strings.Repeat("é", 200), want: strings.Repeat("é", 200)},
		{name: "empty", in: "   ", wantErr: "description: is required"},
		{name: "too long", in: strings.Repeat("a", 201), wantErr: "at most 200"},
		{name: "newline inside", in: "a\nb", wantErr: "control characters"},
		{name: "NUL", in: "a\x00b", wantErr: "control characters"},
		{name: "line separator", in: "a\u2028b", wantErr: "line breaks"},
		{name: "invalid UTF-8", in: "a\xffb", wantErr: "UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Description(tt.in)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseRateLimit(t *testing.T) {
	tests := []struct {
		name, in string
		want     *int
		wantErr  string
	}{
		{name: "off", in: "off"},
		{name: "OFF any case", in: " OFF "},
		{name: "one", in: "1", want: ptr(1)},
		{name: "max", in: "1000000", want: ptr(MaxRPM)},
		{name: "zero", in: "0", wantErr: "rate_limit_rpm: must be at least 1"},
		{name: "negative", in: "-5", wantErr: "at least 1"},
		{name: "too high", in: "1000001", wantErr: "at most 1000000"},
		{name: "not a number", in: "ten", wantErr: `rate_limit_rpm: "ten" is not a whole number`},
		{name: "fraction", in: "1.5", wantErr: "not a whole number"},
		{name: "empty", in: "", wantErr: "not a whole number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseRateLimit(tt.in)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestIPRestrictions(t *testing.T) {
	many := make([]string, 101)
	for i := range many {
		many[i] = netip.AddrFrom4([4]byte{10, 0, byte(i / 256), byte(i)}).String()
	}
	tests := []struct {
		name    string
		in      []string
		want    []string
		wantErr string
	}{
		{name: "none", in: nil, want: []string{}},
		{name: "address stays", in: []string{"10.0.0.1"}, want: []string{"10.0.0.1"}},
		{name: "cidr", in: []string{" 10.0.0.0/8 "}, want: []string{"10.0.0.0/8"}},
		{name: "ipv6 canonical", in: []string{"2001:DB8:0:0::1", "2001:db8::/32"}, want: []string{"2001:db8::1", "2001:db8::/32"}},
		{name: "single-address cidr becomes the address", in: []string{"10.0.0.1/32", "::1/128"}, want: []string{"10.0.0.1", "::1"}},
		{name: "duplicates dropped, first kept", in: []string{"10.0.0.1", "10.0.0.0/8", "10.0.0.1/32", "10.0.0.0/8"}, want: []string{"10.0.0.1", "10.0.0.0/8"}},
		{name: "ipv4-mapped address", in: []string{"::ffff:10.0.0.1", "10.0.0.1"}, want: []string{"10.0.0.1"}},
		{name: "ipv4-mapped cidr", in: []string{"::ffff:10.0.0.0/104"}, want: []string{"10.0.0.0/8"}},
		{name: "everything", in: []string{"0.0.0.0/0", "::/0"}, want: []string{"0.0.0.0/0", "::/0"}},
		{name: "exactly the maximum", in: many[:100], want: many[:100]},
		{name: "bad octet", in: []string{"10.0.0.300"}, wantErr: `ip_restrictions: "10.0.0.300" is not an IPv4/IPv6 address or CIDR`},
		{name: "host bits set", in: []string{"10.0.0.1/8"}, wantErr: `"10.0.0.1/8" has host bits set; did you mean "10.0.0.0/8"?`},
		{name: "bad bits", in: []string{"10.0.0.0/33"}, wantErr: "not an IPv4/IPv6 address or CIDR"},
		{name: "hostname", in: []string{"example.com"}, wantErr: "not an IPv4/IPv6 address or CIDR"},
		{name: "leading zeros", in: []string{"010.0.0.1"}, wantErr: "not an IPv4/IPv6 address or CIDR"},
		{name: "zone", in: []string{"fe80::1%eth0"}, wantErr: "zones are not allowed"},
		{name: "empty entry", in: []string{"10.0.0.1", " "}, wantErr: "ip_restrictions: entry 2 is empty"},
		{name: "too many", in: many, wantErr: "has 101 distinct entries; at most 100"},
		{name: "long input is cut in the message", in: []string{strings.Repeat("9", 500)}, wantErr: "…"},
		{name: "every bad entry at once", in: []string{"10.0.0.300", "10.0.0.1", "example.com", "10.0.0.1/8"},
			wantErr: `ip_restrictions: "10.0.0.300" is not an IPv4/IPv6 address or CIDR; "example.com" is not an IPv4/IPv6 address or CIDR; "10.0.0.1/8" has host bits set`},
		{name: "the first ten of many", in: strings.Split("a,b,c,d,e,f,g,h,i,j,k,l", ","), wantErr: `"j" is not an IPv4/IPv6 address or CIDR; and 2 more`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IPRestrictions(tt.in)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseIPRestrictionsGivesPrefixesForMatching(t *testing.T) {
	got, err := ParseIPRestrictions([]string{"10.0.0.1", "2001:db8::1", "192.168.0.0/16", "::ffff:1.2.3.4"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.1/32"),
		netip.MustParsePrefix("2001:db8::1/128"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("1.2.3.4/32"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if !got[2].Contains(netip.MustParseAddr("::ffff:192.168.7.7").Unmap()) {
		t.Error("an unmapped client address should match an IPv4 CIDR")
	}
}

func TestModels(t *testing.T) {
	known := func(id string) bool { return id == "gpt-4o" || id == "claude" }
	tests := []struct {
		name    string
		in      []string
		known   func(string) bool
		want    []string
		wantErr string
	}{
		{name: "nil is all models", in: nil, want: nil},
		{name: "deduped in order", in: []string{"claude", " gpt-4o", "claude"}, known: known, want: []string{"claude", "gpt-4o"}},
		{name: "any id without a config", in: []string{"whatever"}, want: []string{"whatever"}},
		{name: "empty list", in: []string{}, wantErr: "models: the allow-list is empty"},
		{name: "empty id", in: []string{"gpt-4o", ""}, wantErr: "models: entry 2 is empty"},
		{name: "unknown", in: []string{"gpt-5"}, known: known, wantErr: `models: unknown model "gpt-5"`},
		{name: "control character", in: []string{"a\x01"}, wantErr: "is not a model id"},
		{name: "hash", in: []string{"gpt#0"}, wantErr: "is not a model id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Models(tt.in, tt.known)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseExpiry(t *testing.T) {
	endOf := func(y int, m time.Month, d int) *time.Time {
		t := time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
		return &t
	}
	tests := []struct {
		name, in string
		want     *time.Time
		wantErr  string
	}{
		{name: "never", in: "never"},
		{name: "Never any case", in: "Never"},
		{name: "date means end of day UTC", in: "2025-12-31", want: endOf(2025, 12, 31)},
		{name: "today is allowed", in: "2025-06-15", want: endOf(2025, 6, 15)},
		{name: "yesterday is rejected", in: "2025-06-14", wantErr: "expires_at: 2025-06-14 has already ended"},
		{name: "not a date", in: "tomorrow", wantErr: `expires_at: "tomorrow" is not a date (YYYY-MM-DD) or "never"`},
		{name: "impossible date", in: "2025-02-30", wantErr: "not a date"},
		{name: "other layout", in: "15/06/2026", wantErr: "not a date"},
		{name: "timestamp", in: "2026-01-01T00:00:00Z", wantErr: "not a date"},
		{name: "year 10000", in: "9999-12-31", wantErr: "too far"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseExpiry(tt.in, now)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExpiredFromTheFollowingMidnightUTC(t *testing.T) {
	got, err := ParseExpiry("2025-06-15", now)
	if err != nil {
		t.Fatal(err)
	}
	if want := "2025-06-16T00:00:00Z"; got.Format(time.RFC3339) != want {
		t.Errorf("got %s, want %s", got.Format(time.RFC3339), want)
	}
}

func TestParseExpiryDateAllowsThePast(t *testing.T) {
	got, err := ParseExpiryDate("2000-01-01")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Equal(time.Date(2000, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("got %v", got)
	}
}

func TestCreateDefaults(t *testing.T) {
	k, err := Create(Patch{Description: ptr(" ci ")}, Rules{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	if k.Description != "ci" || k.RateLimitRPM != nil || k.IPRestrictions == nil || len(k.IPRestrictions) != 0 ||
		k.Models != nil || k.ExpiresAt != nil || !k.Enabled {
		t.Errorf("unexpected defaults: %+v", k)
	}
}

func TestCreateReportsEveryInvalidField(t *testing.T) {
	_, err := Create(Patch{
		RateLimit:      ptr("0"),
		IPRestrictions: &[]string{"nope"},
		Models:         &[]string{"x"},
		Expiry:         ptr("2020-01-01"),
	}, Rules{Now: func() time.Time { return now }, KnownModel: func(string) bool { return false }})
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("got %v, want Errors", err)
	}
	for _, f := range []string{FieldDescription, FieldRateLimitRPM, FieldIPRestrictions, FieldModels, FieldExpiresAt} {
		if errs.Field(f) == "" {
			t.Errorf("no error for %s in %v", f, err)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Error("errors should match ErrInvalid")
	}
}

func TestUpdateChangesOnlyGivenFields(t *testing.T) {
	exp := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	old, err := Create(Patch{Description: ptr("old"), RateLimit: ptr("60"), IPRestrictions: &[]string{"10.0.0.1"}}, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	old.ExpiresAt = &exp // expired long ago: editing the description must still work
	got, err := Update(old, Patch{Description: ptr("new")}, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	want := old
	want.Description = "new"
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}

	got, err = Update(old, Patch{RateLimit: ptr("off"), IPRestrictions: &[]string{}, Models: new([]string), Expiry: ptr("2001-01-01"), Enabled: ptr(false)}, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	if got.RateLimitRPM != nil || len(got.IPRestrictions) != 0 || got.Models != nil || got.Enabled ||
		!got.ExpiresAt.Equal(time.Date(2001, 1, 2, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("unexpected update: %+v", got)
	}
}

func TestUpdateWithAnInvalidFieldChangesNothing(t *testing.T) {
	old, err := Create(Patch{Description: ptr("old")}, Rules{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := Update(old, Patch{Description: ptr("new"), IPRestrictions: &[]string{"10.0.0.300"}}, Rules{})
	if err == nil {
		t.Fatal("want an error")
	}
	if !reflect.DeepEqual(got, old) {
		t.Errorf("key changed: %+v", got)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("want an error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	case want != "" && !errors.Is(err, ErrInvalid):
		t.Fatalf("error %q does not match ErrInvalid", err)
	}
}

func TestExpiryDateIsTheDateAnExpiryWasEnteredAs(t *testing.T) {
	for _, date := range []string{"2026-01-01", "2024-02-29", "2026-12-31"} {
		t.Run(date, func(t *testing.T) {
			end, err := ParseExpiryDate(date)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := ExpiryDate(*end)
			if got != date || !ok {
				t.Errorf("ExpiryDate(%v) = %q, %v; want %q, true", end, got, ok, date)
			}
		})
	}
	exact := time.Date(2026, 3, 4, 15, 4, 5, 0, time.FixedZone("X", 3600))
	if got, ok := ExpiryDate(exact); got != "2026-03-04" || ok {
		t.Errorf("ExpiryDate(not a UTC midnight) = %q, %v; want its own UTC date, false", got, ok)
	}
}
