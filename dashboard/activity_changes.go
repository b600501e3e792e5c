package dashboard

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
)

// changeLabels name the audit detail's fields as the forms do, in the
// order the page lists them.
var changeLabels = []struct{ Field, Label string }{
	{keyopts.FieldDescription, "Description"}, {"enabled", "Status"}, {keyopts.FieldRateLimitRPM, "Rate limit"},
	{keyopts.FieldIPRestrictions, "IP restrictions"}, {keyopts.FieldModels, "Model access"},
	{keyopts.FieldExpiresAt, "Expires"}, {"scopes", "Scopes"}, {"grace", "Old secret works on for"},
	{manage.BudgetField("day"), "Day budget"}, {manage.BudgetAlertsField("day"), "Day budget alerts"},
	{manage.BudgetField("week"), "Week budget"}, {manage.BudgetAlertsField("week"), "Week budget alerts"},
	{manage.BudgetField("month"), "Month budget"}, {manage.BudgetAlertsField("month"), "Month budget alerts"},
	{manage.BudgetField("total"), "Total budget"}, {manage.BudgetAlertsField("total"), "Total budget alerts"},
	{manage.FieldTimezone, "Time zone"},
}

// changesOf are a detail's changes as the page shows them: labelled, in
// the forms' order, each value in the forms' words.
func changesOf(changes map[string][2]string) []activityChange {
	var out []activityChange
	for _, l := range changeLabels {
		v, ok := changes[l.Field]
		if !ok {
			continue
		}
		out = append(out, activityChange{Field: l.Label, Before: changeValue(l.Field, v[0]), After: changeValue(l.Field, v[1])})
	}
	for _, f := range slices.Sorted(maps.Keys(changes)) { // a field this page does not know yet
		if !slices.ContainsFunc(changeLabels, func(l struct{ Field, Label string }) bool { return l.Field == f }) {
			out = append(out, activityChange{Field: f, Before: changes[f][0], After: changes[f][1]})
		}
	}
	return out
}

// changeValue words one value of a change.
func changeValue(field, v string) string {
	switch {
	case v == "":
		return ""
	case field == "enabled":
		return map[string]string{"true": "Enabled", "false": "Disabled"}[v]
	case field == keyopts.FieldRateLimitRPM && v == keyopts.Off:
		return "Off"
	case field == keyopts.FieldRateLimitRPM:
		return v + " RPM"
	case field == keyopts.FieldIPRestrictions && v == "any":
		return "Any"
	case field == keyopts.FieldModels && v == "all":
		return "All Models"
	case field == keyopts.FieldExpiresAt && v == keyopts.Never:
		return "Never"
	case field == keyopts.FieldExpiresAt:
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return expiryLabel(&t)
		}
	case strings.HasPrefix(field, "budget.") && strings.HasSuffix(field, ".alert_thresholds"):
		return "at " + strings.ReplaceAll(v, ",", " %,") + " %"
	case strings.HasPrefix(field, "budget.") && v == manage.NoBudget:
		return "None"
	case strings.HasPrefix(field, "budget."):
		return "$" + v
	}
	return v
}
