package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// accountJSON is an account on the wire.
type accountJSON struct {
	ID         string      `json:"id"`
	Email      string      `json:"email"`
	Plan       string      `json:"plan"`
	BalanceUSD money.Nanos `json:"balance_usd"`
	CreatedAt  time.Time   `json:"created_at"`
}

func accountView(a store.Account) accountJSON {
	return accountJSON{ID: a.ID, Email: a.Email, Plan: a.Plan, BalanceUSD: a.Balance, CreatedAt: a.CreatedAt.UTC()}
}

// keyJSON is a key on the wire (docs/api.md). It has no secret field, so a
// listed key cannot carry one.
type keyJSON struct {
	ID             string     `json:"id"`
	Description    string     `json:"description"`
	RateLimitRPM   *int       `json:"rate_limit_rpm"`
	IPRestrictions []string   `json:"ip_restrictions"`
	Models         []string   `json:"models"`
	ExpiresAt      *time.Time `json:"expires_at"`
	Enabled        bool       `json:"enabled"`
	Status         string     `json:"status"`
	CreatedAt      time.Time  `json:"created_at"`
	LastUsedAt     *time.Time `json:"last_used_at"`
	KeyHint        string     `json:"key_hint"`
}

// createdKeyJSON is what key create --json prints: the key and, this once,
// its secret.
type createdKeyJSON struct {
	keyJSON
	Secret string `json:"secret"`
}

func keyView(k store.Key, now time.Time) keyJSON {
	ips := k.IPRestrictions
	if ips == nil {
		ips = []string{}
	}
	return keyJSON{
		ID:             k.ID,
		Description:    k.Description,
		RateLimitRPM:   k.RateLimitRPM,
		IPRestrictions: ips,
		Models:         k.Models,
		ExpiresAt:      utcPtr(k.ExpiresAt),
		Enabled:        k.Enabled,
		Status:         k.Status(now),
		CreatedAt:      k.CreatedAt.UTC(),
		LastUsedAt:     utcPtr(k.LastUsedAt),
		KeyHint:        k.Hint,
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// modelUsageJSON is one model's line of a key's usage.
type modelUsageJSON struct {
	Model            string      `json:"model"`
	Requests         int64       `json:"requests"`
	PromptTokens     int64       `json:"prompt_tokens"`
	CompletionTokens int64       `json:"completion_tokens"`
	CostUSD          money.Nanos `json:"cost_usd"`
}

// usageJSON is a key's usage on the wire.
type usageJSON struct {
	KeyID            string           `json:"key_id"`
	TotalRequests    int64            `json:"total_requests"`
	ErrorRequests    int64            `json:"error_requests"`
	ErrorRate        float64          `json:"error_rate"`
	PromptTokens     int64            `json:"prompt_tokens"`
	CompletionTokens int64            `json:"completion_tokens"`
	TotalCostUSD     money.Nanos      `json:"total_cost_usd"`
	ByModel          []modelUsageJSON `json:"by_model"`
}

func usageView(keyID string, u store.UsageSummary) usageJSON {
	out := usageJSON{
		KeyID:            keyID,
		TotalRequests:    u.TotalRequests,
		ErrorRequests:    u.ErrorRequests,
		PromptTokens:     u.PromptTokens,
		CompletionTokens: u.CompletionTokens,
		TotalCostUSD:     u.Cost,
		ByModel:          make([]modelUsageJSON, 0, len(u.ByModel)),
	}
	if u.TotalRequests > 0 {
		out.ErrorRate = float64(u.ErrorRequests) / float64(u.TotalRequests)
	}
	for _, m := range u.ByModel {
		out.ByModel = append(out.ByModel, modelUsageJSON{
			Model: m.Model, Requests: m.Requests, PromptTokens: m.PromptTokens,
			CompletionTokens: m.CompletionTokens, CostUSD: m.Cost,
		})
	}
	return out
}

// writeJSON writes v indented, without escaping <, > and &.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeFields writes name/value pairs as aligned "name: value" lines.
func writeFields(w io.Writer, pairs ...string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}

func writeAccount(w io.Writer, a store.Account) error {
	return writeFields(w,
		"id", a.ID,
		"email", a.Email,
		"plan", a.Plan,
		"balance_usd", a.Balance.String(),
		"created_at", a.CreatedAt.UTC().Format(time.RFC3339),
	)
}

func writeKey(w io.Writer, k store.Key, now time.Time) error {
	return writeFields(w,
		"id", k.ID,
		"description", k.Description,
		"key_hint", k.Hint,
		"status", k.Status(now),
		"enabled", strconv.FormatBool(k.Enabled),
		"rate_limit_rpm", rpmText(k.RateLimitRPM),
		"ip_restrictions", ipsText(k.IPRestrictions),
		"models", modelsText(k.Models),
		"expires_at", expiryText(k.ExpiresAt, true),
		"created_at", k.CreatedAt.UTC().Format(time.RFC3339),
		"last_used_at", timeText(k.LastUsedAt),
	)
}

func writeKeyTable(w io.Writer, keys []store.Key, now time.Time) error {
	if len(keys) == 0 {
		_, err := fmt.Fprintln(w, "no keys")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tDESCRIPTION\tHINT\tSTATUS\tRPM\tIPS\tMODELS\tEXPIRES\tLAST USED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			k.ID, k.Description, k.Hint, k.Status(now), rpmText(k.RateLimitRPM),
			ipsText(k.IPRestrictions), modelsText(k.Models), expiryText(k.ExpiresAt, false), timeText(k.LastUsedAt))
	}
	return tw.Flush()
}

func writeUsage(w io.Writer, u usageJSON) error {
	if err := writeFields(w,
		"key", u.KeyID,
		"requests", strconv.FormatInt(u.TotalRequests, 10),
		"errors", fmt.Sprintf("%d (%.1f%%)", u.ErrorRequests, 100*u.ErrorRate),
		"prompt_tokens", strconv.FormatInt(u.PromptTokens, 10),
		"completion_tokens", strconv.FormatInt(u.CompletionTokens, 10),
		"cost_usd", u.TotalCostUSD.String(),
	); err != nil {
		return err
	}
	if len(u.ByModel) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "MODEL\tREQUESTS\tPROMPT\tCOMPLETION\tCOST_USD\t")
	for _, m := range u.ByModel {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", m.Model, m.Requests, m.PromptTokens, m.CompletionTokens, m.CostUSD)
	}
	return tw.Flush()
}

func rpmText(rpm *int) string {
	if rpm == nil {
		return "off"
	}
	return strconv.Itoa(*rpm)
}

func ipsText(ips []string) string {
	if len(ips) == 0 {
		return "any"
	}
	return strings.Join(ips, ",")
}

func modelsText(models []string) string {
	if models == nil {
		return "all"
	}
	return strings.Join(models, ",")
}

// expiryText shows an expiry that falls on a UTC midnight as the date whose
// end it is, the way it was entered; long adds the exact instant.
func expiryText(t *time.Time, long bool) string {
	if t == nil {
		return keyopts.Never
	}
	date, ok := keyopts.ExpiryDate(*t)
	if !ok {
		return t.UTC().Format(time.RFC3339)
	}
	if !long {
		return date
	}
	return fmt.Sprintf("end of %s UTC (%s)", date, t.UTC().Format(time.RFC3339))
}

func timeText(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return t.UTC().Format(time.RFC3339)
}
