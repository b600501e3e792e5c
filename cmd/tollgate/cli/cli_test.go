package cli

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// harness runs the CLI against one temporary SQLite database.
type harness struct {
	t  *testing.T
	db string
}

func newHarness(t *testing.T) *harness {
	t.Setenv(EnvDB, "")
	t.Setenv(EnvConfig, "")
	return &harness{t: t, db: storetest.SQLite(t)}
}

// run runs the CLI with --db added and returns stdout, stderr and the error.
func (h *harness) run(args ...string) (string, string, error) {
	h.t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), h.withDB(args), &stdout, &stderr)
	return stdout.String(), stderr.String(), err
}

// withDB puts --db right after the command's name, so a test's own
// arguments come last, as a user would type them.
func (h *harness) withDB(args []string) []string {
	if len(args) < 2 {
		return append(args, "--db="+h.db)
	}
	return append(append(append([]string{}, args[:2]...), "--db="+h.db), args[2:]...)
}

// ok runs the CLI and fails the test on an error; it returns stdout.
func (h *harness) ok(args ...string) string {
	h.t.Helper()
	out, errOut, err := h.run(args...)
	if err != nil {
		h.t.Fatalf("tollgate %s: %v (stderr: %s)", strings.Join(args, " "), err, errOut)
	}
	return out
}

// fails runs the CLI, wants an error containing want, and returns it.
func (h *harness) fails(want string, args ...string) error {
	h.t.Helper()
	out, _, err := h.run(args...)
	if err == nil {
		h.t.Fatalf("tollgate %s: want an error, got output %q", strings.Join(args, " "), out)
	}
	if !strings.Contains(err.Error(), want) {
		h.t.Fatalf("tollgate %s: error %q does not contain %q", strings.Join(args, " "), err, want)
	}
	return err
}

// json runs the CLI and decodes its stdout into a generic value, keeping
// numbers exact.
func (h *harness) json(args ...string) any {
	h.t.Helper()
	out := h.ok(args...)
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		h.t.Fatalf("tollgate %s: output is not JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

func (h *harness) obj(args ...string) map[string]any {
	h.t.Helper()
	m, ok := h.json(args...).(map[string]any)
	if !ok {
		h.t.Fatalf("tollgate %s: output is not a JSON object", strings.Join(args, " "))
	}
	return m
}

func (h *harness) store() store.Store {
	h.t.Helper()
	s, err := store.Open(context.Background(), h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(s.Close)
	return s
}

// newKey creates an account (once) and a key, returning the key's JSON.
func (h *harness) newKey(extra ...string) map[string]any {
	h.t.Helper()
	if _, _, err := h.run("account", "show", "--email", "a@example.com"); err != nil {
		h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	}
	return h.obj(append([]string{"key", "create", "--account", "a@example.com", "--description", "test key", "--json"}, extra...)...)
}

var secretRE = regexp.MustCompile(`^tg_sk_[0-9A-Za-z]{43}$`)

func TestAccountCreateShowAndCreditAreExact(t *testing.T) {
	h := newHarness(t)
	out := h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--balance", "10.5")
	if !strings.Contains(out, "balance_usd:") || !strings.Contains(out, "10.5") || !strings.Contains(out, "a@example.com") {
		t.Errorf("plain output: %q", out)
	}

	a := h.obj("account", "show", "--email", "a@example.com", "--json")
	if a["email"] != "a@example.com" || a["plan"] != "free" || a["balance_usd"] != json.Number("10.5") {
		t.Errorf("account: %v", a)
	}
	if id, _ := a["id"].(string); !strings.HasPrefix(id, "acct_") {
		t.Errorf("id: %v", a["id"])
	}
	if _, err := time.Parse(time.RFC3339, a["created_at"].(string)); err != nil {
		t.Errorf("created_at: %v", err)
	}

	a = h.obj("account", "credit", "--email", "a@example.com", "--amount", "0.000000001", "--json")
	if a["balance_usd"] != json.Number("10.500000001") {
		t.Errorf("balance after credit: %v", a["balance_usd"])
	}
	a = h.obj("account", "show", "--email", "a@example.com", "--json")
	if a["balance_usd"] != json.Number("10.500000001") {
		t.Errorf("balance shown after credit: %v", a["balance_usd"])
	}
}

func TestAccountCreateRejectsTakenEmail(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	h.fails("already exists", "account", "create", "--email", "a@example.com", "--plan", "pro")
}

func TestKeyCreatePrintsOnlyTheSecret(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	out := h.ok("key", "create", "--account", "a@example.com", "--description", "ci")
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 || !secretRE.MatchString(lines[0]) {
		t.Fatalf("output %q is not one secret line", out)
	}
	secret := lines[0]

	// Only the hash and the hint are stored.
	k, err := h.store().KeyByHash(context.Background(), apikey.HashOf(secret))
	if err != nil {
		t.Fatalf("key not found by its secret's hash: %v", err)
	}
	if k.Hint != apikey.Hint(secret) || k.Description != "ci" || !k.Enabled {
		t.Errorf("stored key: %+v", k)
	}
	for _, args := range [][]string{
		{"key", "list", "--account", "a@example.com"},
		{"key", "list", "--account", "a@example.com", "--json"},
	} {
		if out := h.ok(args...); strings.Contains(out, secret) || strings.Contains(out, secret[6:]) {
			t.Errorf("%v shows the secret", args)
		}
	}
}

func TestKeyCreateJSONHasWireFieldsAndSecretOnce(t *testing.T) {
	h := newHarness(t)
	k := h.newKey("--rpm", "60", "--ip", "10.0.0.1", "--ip", "192.168.0.0/16", "--model", "gpt-4o",
		"--expires", "2999-12-31")
	secret, _ := k["secret"].(string)
	if !secretRE.MatchString(secret) {
		t.Fatalf("secret %q", secret)
	}
	want := map[string]any{
		"description":     "test key",
		"rate_limit_rpm":  json.Number("60"),
		"ip_restrictions": []any{"10.0.0.1", "192.168.0.0/16"},
		"models":          []any{"gpt-4o"},
		"expires_at":      "3000-01-01T00:00:00Z",
		"enabled":         true,
		"status":          "enabled",
		"last_used_at":    nil,
		"key_hint":        apikey.Hint(secret),
	}
	for f, v := range want {
		if got, ok := k[f]; !ok || !equalJSON(got, v) {
			t.Errorf("%s = %#v, want %#v", f, got, v)
		}
	}
	for _, f := range []string{"id", "created_at"} {
		if s, _ := k[f].(string); s == "" {
			t.Errorf("%s missing", f)
		}
	}

	list := h.json("key", "list", "--account", "a@example.com", "--json").([]any)
	if len(list) != 1 {
		t.Fatalf("list has %d keys", len(list))
	}
	listed := list[0].(map[string]any)
	if _, has := listed["secret"]; has {
		t.Error("list --json has a secret field")
	}
	delete(k, "secret")
	if !equalJSON(listed, k) {
		t.Errorf("listed %v, created %v", listed, k)
	}
}

func TestKeyCreateDefaults(t *testing.T) {
	h := newHarness(t)
	k := h.newKey()
	if k["rate_limit_rpm"] != nil || k["models"] != nil || k["expires_at"] != nil || k["enabled"] != true {
		t.Errorf("defaults: %v", k)
	}
	if ips, ok := k["ip_restrictions"].([]any); !ok || len(ips) != 0 {
		t.Errorf("ip_restrictions = %#v, want []", k["ip_restrictions"])
	}
	k = h.newKey("--disabled")
	if k["enabled"] != false || k["status"] != "disabled" {
		t.Errorf("--disabled: %v", k)
	}
}

func TestKeyListTable(t *testing.T) {
	h := newHarness(t)
	h.newKey("--description", "first", "--ip", "10.0.0.0/8", "--expires", "2999-12-31")
	h.newKey("--description", "second")
	out := h.ok("key", "list", "--account", "a@example.com")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") {
		t.Fatalf("table:\n%s", out)
	}
	if !strings.Contains(lines[1], "second") || !strings.Contains(lines[2], "first") ||
		!strings.Contains(lines[2], "10.0.0.0/8") || !strings.Contains(lines[2], "2999-12-31") {
		t.Errorf("table (newest first):\n%s", out)
	}
}

func TestKeyUpdateChangesOnlyTheGivenOption(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want map[string]any
	}{
		{"description", []string{"--description", "  renamed "}, map[string]any{"description": "renamed"}},
		{"rpm", []string{"--rpm", "120"}, map[string]any{"rate_limit_rpm": json.Number("120")}},
		{"rpm off", []string{"--rpm", "off"}, map[string]any{"rate_limit_rpm": nil}},
		{"tpm", []string{"--tpm", "40000"}, map[string]any{"tpm_limit": json.Number("40000")}},
		{"tokens per day off", []string{"--tokens-per-day", "off"}, map[string]any{"tokens_per_day": nil}},
		{"ips replace", []string{"--ip", "2001:db8::/32", "--ip=10.1.2.3"}, map[string]any{"ip_restrictions": []any{"2001:db8::/32", "10.1.2.3"}}},
		{"clear ips", []string{"--clear-ips"}, map[string]any{"ip_restrictions": []any{}}},
		{"models replace", []string{"--model", "gpt-4o-mini"}, map[string]any{"models": []any{"gpt-4o-mini"}}},
		{"all models", []string{"--all-models"}, map[string]any{"models": nil}},
		{"expires", []string{"--expires", "2998-06-30"}, map[string]any{"expires_at": "2998-07-01T00:00:00Z", "status": "enabled"}},
		{"expires never", []string{"--expires", "never"}, map[string]any{"expires_at": nil}},
		{"expires in the past expires the key now", []string{"--expires", "2001-01-01"}, map[string]any{"expires_at": "2001-01-02T00:00:00Z", "status": "expired"}},
		{"disable", []string{"--enabled=false"}, map[string]any{"enabled": false, "status": "disabled"}},
		{"enable", []string{"--enabled"}, map[string]any{"enabled": true, "status": "enabled"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			before := h.newKey("--rpm", "60", "--ip", "10.0.0.1", "--model", "gpt-4o", "--expires", "2999-12-31")
			delete(before, "secret")
			id := before["id"].(string)

			after := h.obj(append([]string{"key", "update", id, "--json"}, tt.args...)...)
			want := map[string]any{}
			for f, v := range before {
				want[f] = v
			}
			for f, v := range tt.want {
				want[f] = v
			}
			want["version"] = json.Number("2") // one update
			if !equalJSON(after, want) {
				t.Errorf("after update:\n got %v\nwant %v", after, want)
			}
			listed := h.json("key", "list", "--account", "a@example.com", "--json").([]any)[0]
			if !equalJSON(listed, want) {
				t.Errorf("stored:\n got %v\nwant %v", listed, want)
			}
		})
	}
}

func TestKeyUpdatePlainOutput(t *testing.T) {
	h := newHarness(t)
	id := h.newKey()["id"].(string)
	out := h.ok("key", "update", id, "--description", "x", "--expires", "2999-12-31")
	for _, want := range []string{"description:", " x\n", "status:", "enabled", "end of 2999-12-31 UTC", "rate_limit_rpm:", "off", "models:", "all"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDeletedKeyIsGone(t *testing.T) {
	h := newHarness(t)
	id := h.newKey()["id"].(string)
	if out := h.ok("key", "delete", id); !strings.Contains(out, id) {
		t.Errorf("delete output %q", out)
	}
	err := h.fails("no key with id", "key", "update", id, "--description", "x")
	if errors.Is(err, ErrUsage) {
		t.Error("a missing key is not a usage error")
	}
	h.fails("no key with id", "key", "delete", id)
	h.fails("no key with id", "key", "usage", id)
	if list := h.json("key", "list", "--account", "a@example.com", "--json").([]any); len(list) != 0 {
		t.Errorf("list after delete: %v", list)
	}
}

func TestKeyUsage(t *testing.T) {
	h := newHarness(t)
	k := h.newKey()
	id := k["id"].(string)
	acct := h.obj("account", "show", "--email", "a@example.com", "--json")["id"].(string)

	empty := h.obj("key", "usage", id, "--json")
	if empty["object"] != "usage" || empty["key_id"] != id || empty["account_id"] != acct || empty["group"] != "day" ||
		!equalJSON(empty["totals"], map[string]any{"requests": json.Number("0"), "error_requests": json.Number("0"),
			"prompt_tokens": json.Number("0"), "completion_tokens": json.Number("0"), "cost_usd": json.Number("0"), "refused_requests": json.Number("0"),
			"cached_tokens": json.Number("0"), "cache_write_tokens": json.Number("0"), "reasoning_tokens": json.Number("0")}) ||
		len(empty["by_model"].([]any)) != 0 || len(empty["buckets"].([]any)) != 30 {
		t.Errorf("usage of an unused key, the API's shape over the last 30 days by day: %v", empty)
	}

	now := time.Now().UTC()
	rec := func(id, model string, status int, p, c int64, cost money.Nanos) store.UsageRecord {
		return store.UsageRecord{ID: id, KeyID: k["id"].(string), AccountID: acct, Model: model, Provider: "openai",
			PromptTokens: p, CompletionTokens: c, Cost: cost, Status: status, CreatedAt: now}
	}
	u1 := rec("u1", "gpt-4o", 200, 100, 50, 750_001)
	u1.CachedTokens, u1.CacheWriteTokens, u1.ReasoningTokens = 60, 20, 30
	err := h.store().RecordUsage(context.Background(), []store.UsageRecord{
		u1,
		rec("u2", "gpt-4o", 200, 10, 5, 1),
		rec("u3", "gpt-4o-mini", 200, 1000, 0, 150_000),
		rec("u4", "gpt-4o-mini", 503, 0, 0, 0),
		{ID: "old", KeyID: id, AccountID: acct, Model: "gpt-4o", Status: 200, Cost: 7, CreatedAt: now.Add(-40 * 24 * time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}

	u := h.obj("key", "usage", id, "--json")
	wantTotals := map[string]any{"requests": json.Number("4"), "error_requests": json.Number("1"), "prompt_tokens": json.Number("1110"),
		"completion_tokens": json.Number("55"), "cost_usd": json.Number("0.000900002"), "refused_requests": json.Number("0"),
		"cached_tokens": json.Number("60"), "cache_write_tokens": json.Number("20"), "reasoning_tokens": json.Number("30")}
	wantByModel := []any{
		map[string]any{"model": "gpt-4o", "requests": json.Number("2"), "error_requests": json.Number("0"), "prompt_tokens": json.Number("110"),
			"completion_tokens": json.Number("55"), "cost_usd": json.Number("0.000750002"), "refused_requests": json.Number("0"),
			"cached_tokens": json.Number("60"), "cache_write_tokens": json.Number("20"), "reasoning_tokens": json.Number("30")},
		map[string]any{"model": "gpt-4o-mini", "requests": json.Number("2"), "error_requests": json.Number("1"), "prompt_tokens": json.Number("1000"),
			"completion_tokens": json.Number("0"), "cost_usd": json.Number("0.00015"), "refused_requests": json.Number("0"),
			"cached_tokens": json.Number("0"), "cache_write_tokens": json.Number("0"), "reasoning_tokens": json.Number("0")},
	}
	if !equalJSON(u["totals"], wantTotals) || !equalJSON(u["by_model"], wantByModel) {
		t.Errorf("usage of the last 30 days (not the record of 40 days ago):\n got %v\nwant totals %v, by_model %v", u, wantTotals, wantByModel)
	}
	older := h.obj("key", "usage", id, "--json", "--from", now.Add(-50*24*time.Hour).Format("2006-01-02"))
	if tot := older["totals"].(map[string]any); tot["requests"] != json.Number("5") {
		t.Errorf("--from 50 days back counts the old record too: %v", tot)
	}

	out := h.ok("key", "usage", id)
	for _, s := range []string{"requests:", "4", "1 (25.0%)", "0.000900002", "gpt-4o-mini", "0.00015", "ENDPOINT", "chat"} {
		if !strings.Contains(out, s) {
			t.Errorf("plain usage lacks %q:\n%s", s, out)
		}
	}

	// A deleted key's history stays.
	h.ok("key", "delete", id)
	if u := h.obj("key", "usage", id, "--json"); !equalJSON(u["totals"], wantTotals) {
		t.Errorf("usage after delete: %v", u)
	}
	h.fails("no key with id", "key", "usage", "key_neverexisted")
}

func TestBadInputChangesNothing(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--balance", "5")
	id := h.newKey("--ip", "10.0.0.1")["id"].(string)
	keysBefore := h.ok("key", "list", "--account", "a@example.com", "--json")
	acctBefore := h.ok("account", "show", "--email", "a@example.com", "--json")

	tests := []struct {
		name, want string
		args       []string
	}{
		{"bad ip on create", `ip_restrictions: "10.0.0.300" is not an IPv4/IPv6 address or CIDR`,
			[]string{"key", "create", "--account", "a@example.com", "--description", "x", "--ip", "10.0.0.300"}},
		{"cidr with host bits", `did you mean "10.0.0.0/8"`,
			[]string{"key", "create", "--account", "a@example.com", "--description", "x", "--ip", "10.0.0.1/8"}},
		{"empty description", "description: is required",
			[]string{"key", "create", "--account", "a@example.com", "--description", "  "}},
		{"unknown account", `no account with email "b@example.com"`,
			[]string{"key", "create", "--account", "b@example.com", "--description", "x"}},
		{"bad date", `expires_at: "2030-13-01" is not a date`,
			[]string{"key", "create", "--account", "a@example.com", "--description", "x", "--expires", "2030-13-01"}},
		{"past date on create", "has already ended",
			[]string{"key", "create", "--account", "a@example.com", "--description", "x", "--expires", "2001-01-01"}},
		{"rpm zero", "rate_limit_rpm: must be at least 1",
			[]string{"key", "create", "--account", "a@example.com", "--description", "x", "--rpm", "0"}},
		{"every bad field at once", "description: is required; rate_limit_rpm",
			[]string{"key", "update", id, "--description", "", "--rpm", "x", "--ip", "nope"}},
		{"bad ip on update", "ip_restrictions:",
			[]string{"key", "update", id, "--description", "new", "--ip", "10.0.0.1", "--ip", "bad"}},
		{"bad date on update", "expires_at:",
			[]string{"key", "update", id, "--expires", "31/12/2030"}},
		{"negative amount", "amount_usd must be more than 0",
			[]string{"account", "credit", "--email", "a@example.com", "--amount", "-5"}},
		{"zero amount", "amount_usd must be more than 0",
			[]string{"account", "credit", "--email", "a@example.com", "--amount", "0"}},
		{"amount not a number", "amount: not a dollar amount",
			[]string{"account", "credit", "--email", "a@example.com", "--amount", "5 USD"}},
		{"too many decimals", "more than 9 decimal places",
			[]string{"account", "credit", "--email", "a@example.com", "--amount", "0.0000000001"}},
		{"credit unknown account", "no account with email",
			[]string{"account", "credit", "--email", "b@example.com", "--amount", "1"}},
		{"negative balance", "balance_usd must be from 0",
			[]string{"account", "create", "--email", "c@example.com", "--plan", "free", "--balance", "-1"}},
		{"bad email", "email must be an email address",
			[]string{"account", "create", "--email", "Someone <c@example.com>", "--plan", "free"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := h.fails(tt.want, tt.args...)
			if errors.Is(err, ErrUsage) {
				t.Errorf("invalid input %v reported as a usage error", err)
			}
			if got := h.ok("key", "list", "--account", "a@example.com", "--json"); got != keysBefore {
				t.Errorf("keys changed:\n%s\nwas\n%s", got, keysBefore)
			}
			if got := h.ok("account", "show", "--email", "a@example.com", "--json"); got != acctBefore {
				t.Errorf("account changed:\n%s\nwas\n%s", got, acctBefore)
			}
		})
	}
	h.fails("no account with email", "account", "show", "--email", "c@example.com")
}

func TestConfigGivesPrefixPlansAndModels(t *testing.T) {
	h := newHarness(t)
	cfg := filepath.Join("testdata", "config.yaml")
	h.fails(`plan must be one of the configuration's plans (free, pro), not "gold"`,
		"account", "create", "--email", "a@example.com", "--plan", "gold", "--config", cfg)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--config", cfg)

	h.fails(`models: unknown model "gpt-5"`, "key", "create", "--account", "a@example.com",
		"--description", "x", "--model", "gpt-5", "--config", cfg)
	// The same rule as the API's and the dashboard's: an allow-list stays
	// within the account's plan.
	h.fails(`models: "gpt-4o" is not in the account's plan (free)`, "key", "create", "--account", "a@example.com",
		"--description", "x", "--model", "gpt-4o", "--config", cfg)
	secret := strings.TrimSpace(h.ok("key", "create", "--account", "a@example.com", "--description", "x",
		"--model", "gpt-4o-mini", "--config", cfg))
	if !regexp.MustCompile(`^acme_sk_[0-9A-Za-z]{43}$`).MatchString(secret) {
		t.Errorf("secret %q does not use the config's prefix", secret)
	}

	// The environment variable works like the flag.
	t.Setenv(EnvConfig, cfg)
	h.fails(`models: unknown model "gpt-5"`, "key", "create", "--account", "a@example.com",
		"--description", "x", "--model", "gpt-5")
}

func TestFlagsMayFollowPositionalArguments(t *testing.T) {
	h := newHarness(t)
	id := h.newKey()["id"].(string)
	if u := h.obj("key", "usage", id, "--json"); u["key_id"] != id {
		t.Errorf("usage: %v", u)
	}
	if k := h.obj("key", "update", id, "--description", "x", "--json"); k["description"] != "x" {
		t.Errorf("update: %v", k)
	}
	if k := h.obj("key", "update", "--json", id, "--description=y"); k["description"] != "y" {
		t.Errorf("update with flags on both sides: %v", k)
	}
	if k := h.obj("key", "update", "--description", "z", "--json", "--", id); k["description"] != "z" {
		t.Errorf("update after --: %v", k)
	}
}

func TestUsageErrors(t *testing.T) {
	h := newHarness(t)
	id := h.newKey()["id"].(string)
	tests := []struct {
		name, want string
		args       []string
	}{
		{"unknown command", `unknown command "frobnicate"`, []string{"frobnicate"}},
		{"unknown action", `unknown command "key rotate"`, []string{"key", "rotate"}},
		{"group alone", "key needs an action: create, list, update, delete, budget, usage", []string{"key"}},
		{"unknown flag", "flag provided but not defined: -colour", []string{"key", "list", "--account", "a@example.com", "--colour"}},
		{"missing id", "key update: missing ID", []string{"key", "update", "--description", "x"}},
		{"extra argument", `unexpected argument "extra"`, []string{"key", "delete", id, "extra"}},
		{"bool flag with a space", "write boolean flags as --flag=false", []string{"key", "update", id, "--enabled", "false"}},
		{"nothing to change", "nothing to change", []string{"key", "update", id}},
		{"ip and clear-ips", "not both", []string{"key", "update", id, "--ip", "10.0.0.1", "--clear-ips"}},
		{"model and all-models", "not both", []string{"key", "update", id, "--model", "m", "--all-models"}},
		{"required flag", "key create: --description is required", []string{"key", "create", "--account", "a@example.com"}},
		{"missing flag value", "flag needs an argument", []string{"account", "show", "--email"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := Run(context.Background(), h.withDB(tt.args), &stdout, &stderr)
			if !errors.Is(err, ErrUsage) {
				t.Fatalf("got %v, want a usage error", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), nil, &stdout, &stderr); !errors.Is(err, ErrUsage) || !strings.Contains(stderr.String(), "Usage:") {
		t.Errorf("no arguments: err %v, stderr %q", err, stderr.String())
	}
}

func TestHelpListsEveryCommand(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), []string{arg}, &stdout, &stderr); err != nil {
			t.Fatalf("%s: %v", arg, err)
		}
		for _, c := range append([]string{"serve"}, commandNames()...) {
			if !strings.Contains(stdout.String(), "tollgate "+c) {
				t.Errorf("%s: help lacks %q", arg, c)
			}
		}
		if !strings.Contains(stdout.String(), "not checked") {
			t.Errorf("%s: help does not say plans and models go unchecked without a config", arg)
		}
	}
	var stdout, stderr bytes.Buffer
	if err := Run(context.Background(), []string{"key", "update", "-h"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "Usage: tollgate key update ID") || !strings.Contains(stdout.String(), "-clear-ips") {
		t.Errorf("key update -h:\n%s", stdout.String())
	}
}

func commandNames() []string {
	var out []string
	for _, c := range commands {
		out = append(out, c.name)
	}
	return out
}

// equalJSON compares decoded JSON values, treating []any{} and []any(nil)
// as different, as the wire does.
func equalJSON(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ja) == string(jb)
}

func TestGlobalFlagsMayComeBeforeTheCommand(t *testing.T) {
	h := newHarness(t)
	id := h.newKey()["id"].(string)
	cfg := filepath.Join("testdata", "config.yaml")
	var out bytes.Buffer
	if err := Run(context.Background(), []string{"--config", cfg, "--db", h.db, "key", "create",
		"--account", "a@example.com", "--description", "x"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "acme_sk_") {
		t.Errorf("--config before the command was not used: secret %q lacks the config's prefix", out.String())
	}
	for _, args := range [][]string{
		{"--db", h.db, "key", "usage", id, "--json"},
		{"--db=" + h.db, "key", "usage", "--json", id},
		{"--db", h.db, "--config", cfg, "key", "usage", id, "--json"},
		{"-db", h.db, "key", "usage", id, "--json"},
	} {
		var stdout, stderr bytes.Buffer
		if err := Run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("tollgate %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(stdout.String(), `"key_id": "`+id+`"`) {
			t.Errorf("tollgate %s: %s", strings.Join(args, " "), stdout.String())
		}
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--colour", "key", "list"}, `unknown flag "--colour" before the command`},
		{[]string{"--db"}, "flag --db needs a value"},
	} {
		var stdout, stderr bytes.Buffer
		err := Run(context.Background(), tt.args, &stdout, &stderr)
		if !errors.Is(err, ErrUsage) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("tollgate %s: got %v, want a usage error with %q", strings.Join(tt.args, " "), err, tt.want)
		}
	}
}

func TestConfigCheckSummarisesAGoodFileAndNamesTheFieldOfABadOne(t *testing.T) {
	var out bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"config", "check", filepath.Join("testdata", "config.yaml")}, &out, io.Discard))
	assert.Contains(t, out.String(), "valid")
	assert.Contains(t, out.String(), "gpt-4o")
	assert.Contains(t, out.String(), "PLAN")
	assert.Regexp(t, `(?m)^gpt-4o\s+chat\s`, out.String(), "each model's kind")

	bad := filepath.Join(t.TempDir(), "bad.yaml")
	data, err := os.ReadFile(filepath.Join("testdata", "config.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(string(data), "max_tokens:", "max_tokens: -1 #", 1)), 0o600))
	err = Run(context.Background(), []string{"config", "check", bad}, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_tokens")
	assert.ErrorIs(t, Run(context.Background(), []string{"config", "check"}, io.Discard, io.Discard), ErrUsage)
}

func TestMigrateAppliesTheSchemaAndExits(t *testing.T) {
	h := newHarness(t)
	var stdout, stderr bytes.Buffer
	require.NoError(t, Run(context.Background(), []string{"migrate", "--db", h.db}, &stdout, &stderr), stderr.String())
	assert.Equal(t, "migrations applied\n", stdout.String())
	// The schema is there, recorded migration by migration.
	db, err := sql.Open("sqlite", strings.TrimPrefix(h.db, "sqlite://"))
	require.NoError(t, err)
	defer db.Close()
	var applied int
	require.NoError(t, db.QueryRow("SELECT count(*) FROM schema_migrations").Scan(&applied))
	assert.Positive(t, applied)
	err = Run(context.Background(), []string{"migrate", "extra"}, &stdout, &stderr)
	assert.ErrorIs(t, err, ErrUsage)
}

// Each command that shows a secret only once prints it alone on a line of
// stdout, ending in a newline (so $(tollgate key create …) is the secret),
// and says what it made on one line of stderr, without the secret.
func TestCommandsThatShowASecretOncePrintItAloneOnItsLine(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		secret *regexp.Regexp
		notice string
	}{
		{"key create", []string{"key", "create", "--account", "a@example.com", "--description", "ci"},
			regexp.MustCompile(`^tg_sk_[0-9A-Za-z]{43}\n$`), "tollgate: created key key_"},
		{"token create", []string{"token", "create", "--account", "a@example.com", "--scope", "keys:read"},
			regexp.MustCompile(`^tg_mt_[0-9A-Za-z]{43}\n$`), "tollgate: created management token "},
		{"webhook add", []string{"webhook", "add", "--account", "a@example.com", "--url", "https://hooks.example.com/t"},
			regexp.MustCompile(`^whsec_[0-9A-Za-z_-]{43}\n$`), "tollgate: added webhook whk_"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
			out, errOut, err := h.run(tt.args...)
			require.NoError(t, err, errOut)
			assert.Regexp(t, tt.secret, out, "stdout is the secret and a newline")
			assert.True(t, strings.HasPrefix(errOut, tt.notice), "stderr %q", errOut)
			assert.True(t, strings.HasSuffix(errOut, " shown only this once\n"), "stderr %q", errOut)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "stderr %q is one line", errOut)
			assert.NotContains(t, errOut, strings.TrimSpace(out), "stderr shows the secret")
		})
	}
}
