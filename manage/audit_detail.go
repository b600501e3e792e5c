package manage

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// What an audited action changed: the object's name when it was acted on
// and each changed field's value before and after, stored with the entry
// (store.AuditEntry.Detail) so that the log reads without the object,
// which may since be renamed or deleted. Never a secret: names, options
// and a rotation's grace only.

// AuditDetail is an audit entry's detail.
type AuditDetail struct {
	// Name is the key's description or the token's name.
	Name string `json:"name,omitempty"`
	// Changes are the changed fields: field → [before, after].
	Changes map[string][2]string `json:"changes,omitempty"`
}

// maxDetailValue bounds one value of a detail, in bytes, so that a detail
// stays well within store.MaxAuditDetail.
const maxDetailValue = 200

// ParseAuditDetail reads an entry's detail; ok is false for none.
func ParseAuditDetail(s string) (AuditDetail, bool) {
	var d AuditDetail
	if s == "" || json.Unmarshal([]byte(s), &d) != nil {
		return AuditDetail{}, false
	}
	return d, true
}

// encode is the detail as stored: values clipped, "" for an empty detail.
func (d AuditDetail) encode() string {
	if d.Name == "" && len(d.Changes) == 0 {
		return ""
	}
	d.Name = oaierror.Clip(d.Name, maxDetailValue)
	for f, v := range d.Changes {
		d.Changes[f] = [2]string{oaierror.Clip(v[0], maxDetailValue), oaierror.Clip(v[1], maxDetailValue)}
	}
	b, err := json.Marshal(d)
	if err != nil || len(b) > store.MaxAuditDetail {
		return "" // a map of strings always marshals; a detail too long is dropped, not the entry
	}
	return string(b)
}

// auditWith records an action with its detail; a failure to record is
// logged, not returned (the action is done).
func (s *Service) auditWith(ctx context.Context, a Actor, accountID, action, target string, d AuditDetail) {
	e := store.AuditEntry{AccountID: accountID, Actor: a.String(), Action: action, Target: target, Address: a.Address,
		At: s.opt.Now(), Detail: d.encode(), MemberID: a.MemberID, SSOSubject: a.SSOSubject, Door: a.Door()}
	if err := s.opt.Store.AddAudit(ctx, e); err != nil {
		s.opt.Logger.ErrorContext(ctx, "manage: audit entry not recorded", "action", action, "target", target, "err", err)
	}
}

// keyChanges are the options that differ between two versions of a key,
// in the API's field names.
func keyChanges(before, after store.Key) map[string][2]string {
	out := map[string][2]string{}
	add := func(field, b, a string) {
		if b != a {
			out[field] = [2]string{b, a}
		}
	}
	add(keyopts.FieldDescription, before.Description, after.Description)
	add("enabled", strconv.FormatBool(before.Enabled), strconv.FormatBool(after.Enabled))
	add(keyopts.FieldRateLimitRPM, rpmText(before.RateLimitRPM), rpmText(after.RateLimitRPM))
	add(keyopts.FieldIPRestrictions, listText(before.IPRestrictions, "any"), listText(after.IPRestrictions, "any"))
	add(keyopts.FieldModels, modelsText(before.Models), modelsText(after.Models))
	add(keyopts.FieldExpiresAt, expiryText(before.ExpiresAt), expiryText(after.ExpiresAt))
	return out
}

func rpmText(rpm *int) string {
	if rpm == nil {
		return keyopts.Off
	}
	return strconv.Itoa(*rpm)
}

func listText(l []string, none string) string {
	if len(l) == 0 {
		return none
	}
	return strings.Join(l, ", ")
}

func modelsText(m []string) string {
	if m == nil {
		return "all"
	}
	m = slices.Clone(m)
	slices.Sort(m)
	return listText(m, "none")
}

func expiryText(t *time.Time) string {
	if t == nil {
		return keyopts.Never
	}
	return t.UTC().Format(time.RFC3339)
}

// graceText is a rotation's grace period as its detail says it.
func graceText(grace time.Duration) string {
	if grace == 0 {
		return "none"
	}
	return fmt.Sprint(grace)
}

// FieldTimezone is the audit detail's field of an account's time zone.
const FieldTimezone = "timezone"

// BudgetField is the audit detail's field of the amount of a budget of
// period p ("budget.day"), BudgetAlertsField that of its alert thresholds.
func BudgetField(p string) string { return "budget." + p }

// BudgetAlertsField: see BudgetField.
func BudgetAlertsField(p string) string { return "budget." + p + ".alert_thresholds" }

// NoBudget is a budget's amount in an audit detail when the period has
// none.
const NoBudget = "none"

// budgetChanges are the budgets that differ between two sets: per period,
// the amount in USD (NoBudget for none) and, for a budget kept, its alert
// thresholds.
func budgetChanges(before, after []store.Budget) map[string][2]string {
	out := map[string][2]string{}
	find := func(bs []store.Budget, p string) (store.Budget, bool) {
		i := slices.IndexFunc(bs, func(b store.Budget) bool { return b.Period == p })
		if i < 0 {
			return store.Budget{}, false
		}
		return bs[i], true
	}
	for _, p := range budget.Periods {
		b, hadB := find(before, string(p))
		a, hasA := find(after, string(p))
		amount := func(b store.Budget, ok bool) string {
			if !ok {
				return NoBudget
			}
			return budget.USD(b.Amount)
		}
		if was, is := amount(b, hadB), amount(a, hasA); was != is {
			out[BudgetField(string(p))] = [2]string{was, is}
		}
		if hadB && hasA {
			if was, is := thresholdsText(b.Thresholds), thresholdsText(a.Thresholds); was != is {
				out[BudgetAlertsField(string(p))] = [2]string{was, is}
			}
		}
	}
	return out
}

// thresholdsText is a budget's alert thresholds, in percent.
func thresholdsText(ts []int) string {
	if ts == nil {
		ts = store.DefaultThresholds
	}
	parts := make([]string, len(ts))
	for i, t := range ts {
		parts[i] = strconv.Itoa(t)
	}
	return strings.Join(parts, ", ")
}
