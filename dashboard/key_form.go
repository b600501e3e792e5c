package dashboard

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Choices of the form's radio buttons.
const (
	rateLimitOff    = "off"
	rateLimitCustom = "custom"
	modelsAll       = "all"
	modelsSelected  = "selected"
	expiresNever    = "never"
	expiresOn       = "date"
)

// keyForm is the create and edit form as typed: the text of each field,
// kept as it is so a form with errors shows it again unchanged.
type keyForm struct {
	Description    string
	RateLimitMode  string // rateLimitOff or rateLimitCustom
	RateLimitRPM   string
	IPRestrictions string // comma-separated
	ModelsMode     string // modelsAll or modelsSelected
	Models         []string
	ExpiresMode    string // expiresNever or expiresOn
	ExpiresAt      string // YYYY-MM-DD
	Enabled        bool
	Tokens         tokenLimitsForm // key_form_tokens.go
	Budgets        []budgetField   // key_form_budgets.go
	// Team is the id of the team the key is in, "" for none.
	Team string
}

// newKeyForm is the create form's defaults (docs/api.md, Keys).
func newKeyForm() keyForm {
	return keyForm{RateLimitMode: rateLimitOff, ModelsMode: modelsAll, ExpiresMode: expiresNever, Enabled: true}
}

// keyFormOf fills the form with a key's options, as the edit form shows them.
func keyFormOf(k store.Key) keyForm {
	f := keyForm{
		Description:    k.Description,
		RateLimitMode:  rateLimitOff,
		IPRestrictions: strings.Join(k.IPRestrictions, ", "),
		ModelsMode:     modelsAll,
		ExpiresMode:    expiresNever,
		Enabled:        k.Enabled,
		Tokens:         tokenLimitsFormOf(k),
		Team:           k.TeamID,
	}
	if k.RateLimitRPM != nil {
		f.RateLimitMode, f.RateLimitRPM = rateLimitCustom, strconv.Itoa(*k.RateLimitRPM)
	}
	if k.Models != nil {
		f.ModelsMode, f.Models = modelsSelected, slices.Clone(k.Models)
	}
	if k.ExpiresAt != nil {
		f.ExpiresMode = expiresOn
		f.ExpiresAt, _ = keyopts.ExpiryDate(*k.ExpiresAt) // not a midnight: its own date, kept unless changed
	}
	return f
}

// parseKeyForm reads the posted form. Radio values other than the known
// ones fall back to the defaults (Off, All Models, Never). What was typed
// beside a choice is kept whichever choice was made: formErrors refuses a
// value typed beside a choice that would drop it (mismatches).
func parseKeyForm(v url.Values) keyForm {
	f := keyForm{
		Description:    v.Get("description"),
		RateLimitMode:  rateLimitOff,
		RateLimitRPM:   strings.TrimSpace(v.Get("rate_limit_rpm")),
		IPRestrictions: v.Get("ip_restrictions"),
		ModelsMode:     modelsAll,
		Models:         v["models"],
		ExpiresMode:    expiresNever,
		ExpiresAt:      strings.TrimSpace(v.Get("expires_at")),
		Enabled:        v.Get("enabled") != "",
		Tokens:         parseTokenLimitsForm(v),
		Budgets:        parseBudgetsForm(v),
		Team:           strings.TrimSpace(v.Get("team_id")),
	}
	if v.Get("rate_limit") == rateLimitCustom {
		f.RateLimitMode = rateLimitCustom
	}
	if v.Get("model_access") == modelsSelected {
		f.ModelsMode = modelsSelected
	}
	if v.Get("expires") == expiresOn {
		f.ExpiresMode = expiresOn
	}
	return f
}

// mismatches refuses a value typed beside a choice that would drop it: a
// number beside Off, models ticked beside All Models, a date beside Never.
// Saving would silently lose what the visitor typed; saying so lets them
// choose.
func (f keyForm) mismatches(errs fieldErrors) {
	if f.RateLimitMode == rateLimitOff && f.RateLimitRPM != "" {
		errs[keyopts.FieldRateLimitRPM] = fmt.Sprintf("You typed a rate limit of %s requests per minute, but Rate Limit is set to Off. "+
			"Choose Custom to apply it, or clear the number to have no limit of the key's own.", f.RateLimitRPM)
	}
	if f.ModelsMode == modelsAll && len(f.Models) > 0 {
		errs[keyopts.FieldModels] = fmt.Sprintf("You ticked %d model(s), but Model Access is set to All Models. "+
			"Choose Selected Models to allow only those, or untick them to allow every model of your plan.", len(f.Models))
	}
	if f.ExpiresMode == expiresNever && f.ExpiresAt != "" {
		errs[keyopts.FieldExpiresAt] = "You picked a date (" + f.ExpiresAt + "), but Expires At is set to Never. " +
			"Choose “At the end of” to make the key stop working then, or clear the date."
	}
}

// rateLimitText is the Rate Limit as keyopts reads it.
func (f keyForm) rateLimitText() string {
	if f.RateLimitMode == rateLimitCustom {
		return f.RateLimitRPM
	}
	return keyopts.Off
}

// ipEntries splits the comma-separated text into entries; blanks around
// commas and a trailing comma are not entries.
func (f keyForm) ipEntries() []string {
	out := []string{}
	for e := range strings.SplitSeq(f.IPRestrictions, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// modelList is the allow-list as keyopts reads it: nil for All Models.
func (f keyForm) modelList() []string {
	if f.ModelsMode != modelsSelected {
		return nil
	}
	if f.Models == nil {
		return []string{} // Selected Models with none ticked: keyopts says why that is refused
	}
	return f.Models
}

// expiryText is the expiry as keyopts reads it.
func (f keyForm) expiryText() string {
	if f.ExpiresMode == expiresOn {
		return f.ExpiresAt
	}
	return keyopts.Never
}

// patch is the change the form asks for. With was nil (creating), every
// field is in it; when editing, was is the form as it was shown, and only
// the fields the visitor changed are in it, so a key saved under older rules
// (a model since removed from the configuration, an expiry set by the CLI at
// an exact time) keeps what was not touched.
func (f keyForm) patch(was *keyForm) keyopts.Patch {
	var p keyopts.Patch
	if was == nil || f.Description != was.Description {
		p.Description = &f.Description
	}
	if rl := f.rateLimitText(); was == nil || rl != was.rateLimitText() {
		p.RateLimit = &rl
	}
	var wasTokens *tokenLimitsForm
	if was != nil {
		wasTokens = &was.Tokens
	}
	f.Tokens.patch(wasTokens, &p)
	if ips := f.ipEntries(); was == nil || !slices.Equal(ips, was.ipEntries()) {
		p.IPRestrictions = &ips
	}
	if m := f.modelList(); was == nil || !sameModels(m, was.modelList()) {
		p.Models = &m
	}
	if e := f.expiryText(); was == nil || e != was.expiryText() {
		p.Expiry = &e
	}
	if was == nil || f.Enabled != was.Enabled {
		p.Enabled = &f.Enabled
	}
	return p
}

// sameModels compares two allow-lists as sets; nil (All Models) equals only nil.
func sameModels(a, b []string) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// fieldErrors are validation messages by keyopts field name ("" for a
// sentence about the whole form).
type fieldErrors map[string]string

// mismatched reports whether a value was typed beside a choice that would
// drop it (see mismatches).
func (f keyForm) mismatched() bool {
	errs := fieldErrors{}
	f.mismatches(errs)
	return len(errs) > 0
}

// formErrors words the management service's answer err to the options of
// f as the form's sentences, beside their fields, and adds the form's own
// findings (mismatches): nil when there are none. An error that is no
// refusal of the form is returned as it is.
func (d *Dashboard) formErrors(f keyForm, err error) (fieldErrors, error) {
	errs := fieldErrors{}
	var opts *manage.OptionsError
	var oe oaierror.Error
	switch {
	case err == nil:
	case errors.As(err, &opts):
		if opts.NotInPlan != "" {
			errs[keyopts.FieldModels] = fmt.Sprintf("%q is not in your plan (%s)", opts.NotInPlan, opts.Plan)
		}
		for _, e := range opts.Fields {
			if errs[e.Field] == "" {
				errs[e.Field] = sentence(e.Field, e.Message)
			}
		}
	case errors.As(err, &oe) && oe.Code == manage.ErrKeyLimit.Code:
		errs[""] = fmt.Sprintf("This account has %d keys, the most it may have. Delete a key it no longer needs, then create this one.",
			d.config().Limits.KeysPerAccount)
	case errors.As(err, &oe) && oe.Status == http.StatusBadRequest:
		errs[oe.Param] = oe.Message
	default:
		return nil, err
	}
	f.explainMissing(errs)
	f.mismatches(errs)
	if len(errs) == 0 {
		return nil, nil
	}
	return errs, nil
}

// explainMissing rewords keyopts' messages about a field left empty in
// the form's own terms (its radio buttons), where keyopts speaks of the
// values "off", "never" and an unset list.
func (f keyForm) explainMissing(errs fieldErrors) {
	missing := []struct {
		field string
		empty bool
		msg   string
	}{
		{keyopts.FieldDescription, strings.TrimSpace(f.Description) == "", "Enter a description."},
		{keyopts.FieldRateLimitRPM, f.RateLimitMode == rateLimitCustom && f.RateLimitRPM == "", "Enter a number of requests per minute, or choose Off."},
		{keyopts.FieldModels, f.ModelsMode == modelsSelected && len(f.Models) == 0, "Tick at least one model, or choose All Models."},
		{keyopts.FieldExpiresAt, f.ExpiresMode == expiresOn && f.ExpiresAt == "", "Pick a date, or choose Never."},
	}
	for _, m := range missing {
		if m.empty && errs[m.field] != "" {
			errs[m.field] = m.msg
		}
	}
}

// keyFormPage is what the create and edit form shows.
type keyFormPage struct {
	// Key is the key being edited; nil on the create form.
	Key    *keyRow
	Action string
	Form   keyForm
	Errors fieldErrors
	Models []modelChoice
	// Today is the earliest date the create form offers for Expires At.
	Today string
	// ConfirmExpiry is the expiry date, already ended, that the edit form
	// asks to confirm before it disables the key ("" when none).
	ConfirmExpiry string
	// Budgets are the spend budgets' fields; Timezone names the zone of
	// their windows.
	Budgets  []keyBudgetField
	Timezone string
	// Teams are the account's teams the key may be put in (none: the
	// field is not shown).
	Teams []teamChoice
}

// teamChoice is one option of the Team field.
type teamChoice struct {
	ID, Name string
	Selected bool
}

// modelChoice is one checkbox of Model Access.
type modelChoice struct {
	ID      string
	Checked bool
	// Unavailable marks a model the key allows that the plan no longer
	// covers; it is shown so that saving does not drop it silently.
	Unavailable bool
}

// modelChoices are the models of the account's plan, in the
// configuration's order, then any others the form has selected.
func modelChoices(cfg *config.Config, planName string, f keyForm) []modelChoice {
	checked := map[string]bool{}
	if f.ModelsMode == modelsSelected {
		for _, m := range f.Models {
			checked[strings.TrimSpace(m)] = true
		}
	}
	var out []modelChoice
	seen := map[string]bool{}
	if plan, ok := cfg.Plan(planName); ok {
		for _, m := range cfg.Models {
			if plan.AllowsModel(m.ID) {
				out = append(out, modelChoice{ID: m.ID, Checked: checked[m.ID]})
				seen[m.ID] = true
			}
		}
	}
	if f.ModelsMode == modelsSelected {
		for _, m := range f.Models {
			if m = strings.TrimSpace(m); m != "" && !seen[m] {
				out = append(out, modelChoice{ID: m, Checked: true, Unavailable: true})
				seen[m] = true
			}
		}
	}
	return out
}

// fieldLabels are the form's names for keyopts' fields.
var fieldLabels = map[string]string{
	keyopts.FieldDescription:    "Description",
	keyopts.FieldRateLimitRPM:   "Rate Limit",
	keyopts.FieldTPMLimit:       "Tokens per Minute",
	keyopts.FieldTokensPerDay:   "Tokens per Day",
	keyopts.FieldIPRestrictions: "IP Restrictions",
	keyopts.FieldModels:         "Model Access",
	keyopts.FieldExpiresAt:      "Expires At",
}

// sentence makes a keyopts message (written for the CLI: "is required",
// `"x" is not a whole number or "off"`) a sentence naming the form's field,
// in the form's words (Off, Never).
func sentence(field, msg string) string {
	label := fieldLabels[field]
	if label == "" {
		label = "This field"
	}
	msg = strings.NewReplacer(`"off"`, "Off", `"never"`, "Never", `or Off`, `or choose Off`, `or Never`, `or choose Never`).Replace(msg)
	switch {
	case strings.HasPrefix(msg, "is ") || strings.HasPrefix(msg, "has ") || strings.HasPrefix(msg, "must "):
		msg = label + " " + msg
	default:
		msg = label + ": " + msg
	}
	if !strings.HasSuffix(msg, ".") && !strings.HasSuffix(msg, "?") {
		msg += "."
	}
	return msg
}
