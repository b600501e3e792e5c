package money

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseUSDIsExact(t *testing.T) {
	tests := []struct {
		in   string
		want Nanos
	}{
		{"10", 10 * PerDollar},
		{"0.15", 150_000_000},
		{".5", 500_000_000},
		{"1.000000001", 1_000_000_001},
		{"-2.5", -2_500_000_000},
		{"+3", 3 * PerDollar},
		{"0", 0},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseUSD(tt.in)
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseUSDRejectsWhatIsNotAnAmount(t *testing.T) {
	for _, in := range []string{"", ".", "-", "1e3", "1.0000000001", "$5", " 1", "1,5", "abc", "99999999999999999999", "1..2"} {
		t.Run(in, func(t *testing.T) {
			_, err := ParseUSD(in)
			assert.ErrorIs(t, err, ErrInvalid)
		})
	}
}

func TestStringRoundTrips(t *testing.T) {
	for _, n := range []Nanos{0, 1, -1, 150_000_000, 10 * PerDollar, 1_234_567_891, math.MaxInt64, math.MinInt64 + 1} {
		got, err := ParseUSD(n.String())
		require.NoError(t, err, n.String())
		assert.Equal(t, n, got)
	}
	assert.Equal(t, "0.15", Nanos(150_000_000).String())
	assert.Equal(t, "-0.000000001", Nanos(-1).String())
}

func TestStringIsTheDecimalAmountInOneAllocation(t *testing.T) {
	for _, c := range []struct {
		n    Nanos
		want string
	}{
		{0, "0"}, {10 * PerDollar, "10"}, {150_000_000, "0.15"}, {-1, "-0.000000001"}, {1_234_567_891, "1.234567891"},
		{-2*PerDollar - 500_000_000, "-2.5"}, {math.MaxInt64, "9223372036.854775807"}, {math.MinInt64, "-9223372036.854775808"},
	} {
		assert.Equal(t, c.want, c.n.String())
		assert.Equal(t, "$"+c.want, string(c.n.Append([]byte("$"))))
	}
	n := Nanos(1_234_567_891)
	assert.LessOrEqual(t, testing.AllocsPerRun(100, func() { _ = n.String() }), 1.0)
}

func TestJSONIsAnExactNumber(t *testing.T) {
	b, err := json.Marshal(struct {
		B Nanos `json:"b"`
	}{B: 9_999_850_000})
	require.NoError(t, err)
	assert.JSONEq(t, `{"b":9.99985}`, string(b))
	var back struct {
		B Nanos `json:"b"`
	}
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, Nanos(9_999_850_000), back.B)
}

func TestCostRoundsUpToTheNanoDollar(t *testing.T) {
	tests := []struct {
		name       string
		tokens     int64
		perMillion Nanos
		want       Nanos
	}{
		{"gpt-4o-mini input", 1000, 150_000_000, 150_000},
		{"one token at 0.15/M", 1, 150_000_000, 150},
		{"fraction rounds up", 1, 1, 1},
		{"zero tokens", 0, 150_000_000, 0},
		{"no overflow on large products", 10_000_000, 1_000_000 * PerDollar, 10_000_000 * PerDollar},
		{"saturates", math.MaxInt64, math.MaxInt64, math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Cost(tt.tokens, tt.perMillion))
		})
	}
}

func TestAddSaturates(t *testing.T) {
	assert.Equal(t, Nanos(3), Add(1, 2))
	assert.Equal(t, Nanos(math.MaxInt64), Add(math.MaxInt64, 1))
	assert.Equal(t, Nanos(math.MinInt64), Add(math.MinInt64, -1))
}
