// Package money holds amounts of US dollars as integer nano-dollars, so that
// balances, prices and costs are exact: no float ever touches money.
package money

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// Nanos is an amount in nano-dollars (1e-9 USD). The zero value is $0.
type Nanos int64

// PerDollar is the number of nano-dollars in one dollar.
const PerDollar Nanos = 1_000_000_000

// ErrInvalid reports text that is not a decimal dollar amount.
var ErrInvalid = errors.New("not a dollar amount")

// ParseUSD parses a decimal dollar amount such as "10", "0.15", "-2.5" or
// "1.000000001". At most nine digits may follow the point; exponents, spaces
// and currency signs are rejected, so what is parsed is exactly what was written.
func ParseUSD(s string) (Nanos, error) {
	orig := s
	neg := false
	if strings.HasPrefix(s, "-") || strings.HasPrefix(s, "+") {
		neg = s[0] == '-'
		s = s[1:]
	}
	whole, frac, hasPoint := strings.Cut(s, ".")
	if whole == "" && frac == "" || (hasPoint && frac == "") && whole == "" {
		return 0, fmt.Errorf("%w: %q", ErrInvalid, orig)
	}
	if len(frac) > 9 {
		return 0, fmt.Errorf("%w: %q has more than 9 decimal places", ErrInvalid, orig)
	}
	if !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("%w: %q", ErrInvalid, orig)
	}
	var w int64
	if whole != "" {
		v, err := strconv.ParseInt(whole, 10, 64)
		if err != nil || v > math.MaxInt64/int64(PerDollar) {
			return 0, fmt.Errorf("%w: %q is too large", ErrInvalid, orig)
		}
		w = v
	}
	var f int64
	if frac != "" {
		padded := frac + strings.Repeat("0", 9-len(frac))
		v, err := strconv.ParseInt(padded, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %q", ErrInvalid, orig)
		}
		f = v
	}
	n := w*int64(PerDollar) + f
	if n < 0 {
		return 0, fmt.Errorf("%w: %q is too large", ErrInvalid, orig)
	}
	if neg {
		n = -n
	}
	return Nanos(n), nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// String formats n as a decimal dollar amount with no trailing zeros after
// the point ("10", "0.15", "-0.000000001").
func (n Nanos) String() string {
	var buf [24]byte // "-9223372036.854775808"
	return string(n.Append(buf[:0]))
}

// Append appends n as String formats it to b: a usage record's cost is
// written this way on every request, without fmt.
func (n Nanos) Append(b []byte) []byte {
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = uint64(-n)
		if n == math.MinInt64 {
			u = uint64(math.MaxInt64) + 1
		}
	}
	whole := u / uint64(PerDollar)
	frac := u % uint64(PerDollar)
	b = strconv.AppendUint(b, whole, 10)
	if frac == 0 {
		return b
	}
	// Nine digits, zero-padded, then the trailing zeros dropped.
	var digits [9]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	end := len(digits)
	for digits[end-1] == '0' {
		end--
	}
	return append(append(b, '.'), digits[:end]...)
}

// MarshalJSON writes n as an exact JSON number of dollars.
func (n Nanos) MarshalJSON() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalJSON reads a JSON number (or a string holding one) of dollars exactly.
func (n *Nanos) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// Cost is the price of tokens at a rate given in nano-dollars per million
// tokens, rounded up to the next nano-dollar so that a provider's charge is
// never undercounted. It saturates instead of overflowing.
func Cost(tokens int64, perMillion Nanos) Nanos {
	if tokens <= 0 || perMillion <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(tokens), uint64(perMillion))
	if hi >= 1_000_000 { // quotient would not fit in 64 bits
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return Nanos(q)
}

// Add returns a+b, saturating at the int64 limits.
func Add(a, b Nanos) Nanos {
	s := a + b
	if (b > 0 && s < a) || (b < 0 && s > a) {
		if b > 0 {
			return math.MaxInt64
		}
		return math.MinInt64
	}
	return s
}
