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
		{150_000_000, "$0.15"},
		{4350, "$0.00000435"},
		{1, "$0.000000001"},
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
