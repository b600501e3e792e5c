package config

import (
	"fmt"
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/tollgate/tollgate/money"
)

// PlanBudget is a spend budget a plan gives every new key of its accounts
// (plans[].default_key_budgets): an amount in dollars per period.
type PlanBudget struct {
	// Period is day, week, month (calendar windows in the account's time
	// zone) or total.
	Period    string      `yaml:"period"`
	AmountUSD money.Nanos `yaml:"amount_usd"`
}

// budgetPeriods are the periods a budget may have.
var budgetPeriods = []string{"day", "week", "month", "total"}

// UnmarshalYAML reads the amount exactly (as prices are) and refuses an
// unknown field.
func (b *PlanBudget) UnmarshalYAML(value *yaml.Node) error {
	if value.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a default key budget is a mapping of period and amount_usd", value.Line)
	}
	for i := 0; i+1 < len(value.Content); i += 2 {
		k, v := value.Content[i], value.Content[i+1]
		switch k.Value {
		case "period":
			if err := v.Decode(&b.Period); err != nil {
				return err
			}
		case "amount_usd":
			n, err := unmarshalNanos(v)
			if err != nil {
				return err
			}
			b.AmountUSD = n
		default:
			return fmt.Errorf("line %d: field %s not found in a default key budget (period, amount_usd)", k.Line, k.Value)
		}
	}
	return nil
}

// validateBudgets checks a plan's default key budgets: known periods, one
// budget per period, amounts not negative.
func validateBudgets(f string, budgets []PlanBudget) error {
	seen := map[string]bool{}
	for i, b := range budgets {
		g := fmt.Sprintf("%s.default_key_budgets[%d]", f, i)
		switch {
		case !slices.Contains(budgetPeriods, b.Period):
			return fieldErr(g+".period", "must be day, week, month or total, not %q", b.Period)
		case seen[b.Period]:
			return fieldErr(g+".period", "a second %s budget (one per period)", b.Period)
		case b.AmountUSD < 0:
			return fieldErr(g+".amount_usd", "must not be negative")
		}
		seen[b.Period] = true
	}
	return nil
}
