package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/apikey"
)

func TestTokenCommandsMakeListAndRevokeManagementTokensAndAuditThem(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")
	ctx := context.Background()

	admin := strings.TrimSuffix(h.ok("token", "create", "--admin"), "\n")
	if apikey.CheckToken(admin) != nil || strings.Contains(admin, "\n") {
		t.Fatalf("token create --admin printed %q, not one token", admin)
	}
	var made struct {
		ID, Token, Name string
		AccountID       *string `json:"account_id"`
		Scopes          []string
		ExpiresAt       *time.Time `json:"expires_at"`
	}
	out := h.ok("token", "create", "--account", "a@example.com", "--scope", "keys:read", "--scope", "usage:read", "--expires", "2030-01-31", "--json")
	if err := json.Unmarshal([]byte(out), &made); err != nil {
		t.Fatalf("--json: %v: %s", err, out)
	}
	if made.Name != "a@example.com" || made.AccountID == nil || strings.Join(made.Scopes, ",") != "keys:read,usage:read" ||
		made.ExpiresAt == nil || !made.ExpiresAt.Equal(time.Date(2030, 2, 1, 0, 0, 0, 0, time.UTC)) || apikey.CheckToken(made.Token) != nil {
		t.Fatalf("made %+v", made)
	}
	tok, err := h.store().TokenByHash(ctx, apikey.HashOf(made.Token), time.Now())
	if err != nil || tok.ID != made.ID {
		t.Fatalf("stored by its hash: %+v %v", tok, err)
	}

	list := h.ok("token", "list", "--account", "a@example.com")
	if !strings.Contains(list, made.ID) || strings.Contains(list, made.Token) {
		t.Fatalf("token list: %q", list)
	}
	if admins := h.ok("token", "list"); strings.Contains(admins, made.ID) || strings.Count(admins, "\n") != 1 {
		t.Fatalf("the admin tokens alone: %q", admins)
	}

	h.ok("token", "revoke", made.ID)
	if _, err := h.store().TokenByHash(ctx, apikey.HashOf(made.Token), time.Now()); err == nil {
		t.Fatal("revoked, yet found")
	}
	h.fails("no live token", "token", "revoke", made.ID)
	h.fails("either --admin or --account", "token", "create")
	h.fails("needs either", "token", "create", "--admin", "--account", "a@example.com")
	h.fails("scopes must name", "token", "create", "--account", "a@example.com")
	h.fails("not a scope", "token", "create", "--account", "a@example.com", "--scope", "root")
	h.fails("--expires", "token", "create", "--admin", "--expires", "soon")

	// Key and account commands land in the same audit log (actor cli).
	h.ok("key", "create", "--account", "a@example.com", "--description", "ci")
	acct, err := h.store().AccountByEmail(ctx, "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := h.store().ListAudit(ctx, acct.ID, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Actor != "cli" {
			t.Errorf("actor %q", e.Actor)
		}
		got = append(got, e.Action)
	}
	if strings.Join(got, ",") != "key.create,token.revoke,token.create,account.create" {
		t.Fatalf("audit: %v", got)
	}
}

func TestAccountPlanMovesTheAccountThroughTheServiceAndAuditsIt(t *testing.T) {
	h := newHarness(t)
	cfg := filepath.Join("testdata", "config.yaml")
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free", "--config", cfg)
	out := h.ok("account", "plan", "--email", "a@example.com", "--plan", "pro", "--config", cfg, "--json")
	if !strings.Contains(out, `"plan": "pro"`) {
		t.Errorf("account plan --json: %s", out)
	}
	h.fails(`plan must be one of the configuration's plans`, "account", "plan", "--email", "a@example.com", "--plan", "gold", "--config", cfg)
	h.fails("no account with email", "account", "plan", "--email", "b@example.com", "--plan", "pro")
	acct, err := h.store().AccountByEmail(t.Context(), "a@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if acct.Plan != "pro" {
		t.Errorf("plan %q after a refused move, want pro", acct.Plan)
	}
	entries, err := h.store().ListAudit(t.Context(), acct.ID, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || entries[0].Action != "account.plan" || entries[0].Actor != "cli" {
		t.Errorf("audit: %+v", entries)
	}
}
