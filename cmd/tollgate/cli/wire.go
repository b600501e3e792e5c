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
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// The CLI's output: --json writes manage's views (the API's shape), and
// the text forms below show the same fields for people.

// writeJSON writes v indented, without escaping <, > and &.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeShownOnce prints what a create command shows only this once: the
// notice on stderr, a line of its own, then on stdout the secret alone on
// its line (so that $(tollgate key create …) is the secret), or with
// --json the view, which carries the secret.
func writeShownOnce(e *env, notice, secret string, asJSON bool, view any) error {
	fmt.Fprintf(e.stderr, "tollgate: %s\n", notice)
	if asJSON {
		return writeJSON(e.stdout, view)
	}
	_, err := fmt.Fprintln(e.stdout, secret)
	return err
}

// writeFields writes name/value pairs as aligned "name: value" lines.
func writeFields(w io.Writer, pairs ...string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(tw, "%s:\t%s\n", pairs[i], pairs[i+1])
	}
	return tw.Flush()
}

// printAccount prints an account: as the API's JSON, or as fields.
func printAccount(e *env, a store.Account, asJSON bool) error {
	if asJSON {
		return writeJSON(e.stdout, manage.AccountView(a))
	}
	return writeFields(e.stdout,
		"id", a.ID,
		"email", a.Email,
		"plan", a.Plan,
		"balance_usd", a.Balance.String(),
		"reserved_usd", a.Reserved.String(),
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
		"tpm_limit", tokensText(k.TPMLimit),
		"tokens_per_day", tokensText(k.TokensPerDay),
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

func tokensText(n *int64) string {
	if n == nil {
		return "off"
	}
	return strconv.FormatInt(*n, 10)
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
