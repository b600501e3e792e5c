package dashboard

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/money"
)

func TestUSD(t *testing.T) {
	tests := []struct {
		in   money.Nanos
		want string
	}{
		{0, "$0.00"},
		{10 * money.PerDollar, "$10.00"},
		{9_999_331_600, "$10.00"}, // from $1 up: to the cent
		{1_234_500_000_000, "$1,234.50"},
		{1_005_000_000, "$1.01"},
		{1_004_999_999, "$1.00"},
		{150_000_000, "$0.15"},
		{600_000, "$0.0006"},
		{435_120, "$0.0004351"}, // below: four significant digits
		{435_160, "$0.0004352"},
		{4350, "$0.00000435"},
		{1, "$0.000000001"},
		{999_960_000, "$1.00"},
		{999_940_000, "$0.9999"},
		{1234567 * money.PerDollar, "$1,234,567.00"},
		{-money.PerDollar / 2, "-$0.50"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, usd(tt.in))
		})
	}
}

func TestExpiryLabelShowsTheLastDayTheKeyWorks(t *testing.T) {
	midnight := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	exact := time.Date(2026, 1, 1, 12, 30, 0, 0, time.UTC)
	assert.Equal(t, "Never", expiryLabel(nil))
	assert.Equal(t, "2025-12-31", expiryLabel(&midnight))
	assert.Equal(t, "2026-01-01 12:30 UTC", expiryLabel(&exact))
}

func TestPercent(t *testing.T) {
	assert.Equal(t, "–", percent(0, 0))
	assert.Equal(t, "0.0%", percent(0, 3))
	assert.Equal(t, "33.3%", percent(1, 3))
	assert.Equal(t, "100.0%", percent(2, 2))
}
