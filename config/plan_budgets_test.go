package config

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
)

func TestPlansGiveDefaultKeyBudgetsReadExactly(t *testing.T) {
	withBudgets := strings.Replace(valid, "    default_rpm: 20\n", `    default_rpm: 20
    default_key_budgets:
      - {period: day, amount_usd: 0.10}
      - {period: total, amount_usd: 5}
`, 1)
	c, err := Parse([]byte(withBudgets), env(map[string]string{"OPENAI_API_KEY": "k"}))
	require.NoError(t, err)
	p, ok := c.Plan("free")
	require.True(t, ok)
	require.Equal(t, []PlanBudget{{"day", 100_000_000}, {"total", 5 * money.PerDollar}}, p.DefaultKeyBudgets)

	for name, tc := range map[string]struct{ budgets, want string }{
		"unknown period":  {"[{period: year, amount_usd: 1}]", "plans[1] (free).default_key_budgets[0].period"},
		"two per period":  {"[{period: day, amount_usd: 1}, {period: day, amount_usd: 2}]", "default_key_budgets[1].period"},
		"negative amount": {"[{period: day, amount_usd: -1}]", "default_key_budgets[0].amount_usd"},
		"inexact amount":  {"[{period: day, amount_usd: 0.0000000001}]", "line"},
		"unknown field":   {"[{period: day, amount: 1}]", "amount"},
	} {
		bad := strings.Replace(valid, "    default_rpm: 20\n", "    default_rpm: 20\n    default_key_budgets: "+tc.budgets+"\n", 1)
		_, err := Parse([]byte(bad), env(map[string]string{"OPENAI_API_KEY": "k"}))
		require.ErrorContains(t, err, tc.want, name)
	}
}
