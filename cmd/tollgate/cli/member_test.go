package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/apikey"
	"github.com/tollgate/tollgate/store"
)

func TestMemberCommandsInviteListChangeSuspendAndRemovePeople(t *testing.T) {
	h := newHarness(t)
	h.ok("account", "create", "--email", "a@example.com", "--plan", "free")

	var inv struct {
		ID, Email, Role, Secret string
		MailSent                *bool `json:"mail_sent"`
	}
	out := h.ok("member", "invite", "--account", "a@example.com", "--email", "dev@example.com", "--role", "developer", "--json")
	if err := json.Unmarshal([]byte(out), &inv); err != nil {
		t.Fatalf("member invite --json printed %q: %v", out, err)
	}
	if !strings.HasPrefix(inv.Secret, "tg_inv_") || inv.Role != "developer" || inv.MailSent == nil || *inv.MailSent {
		t.Fatalf("invitation %+v", inv)
	}
	if list := h.ok("member", "list", "--account", "a@example.com"); !strings.Contains(list, "a@example.com") || !strings.Contains(list, "dev@example.com") ||
		strings.Contains(list, inv.Secret) {
		t.Fatalf("member list printed %q: want the owner and the invitation, never its secret", list)
	}

	st := h.store()
	if _, err := st.AcceptInvitation(context.Background(), apikey.HashOf(inv.Secret), store.Member{Name: "Dev", PasswordHash: "$argon2id$x"}, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.ok("member", "role", "--account", "a@example.com", "--email", "dev@example.com", "--role", "billing")
	h.ok("member", "suspend", "--account", "a@example.com", "--email", "dev@example.com")
	list := h.ok("member", "list", "--account", "a@example.com", "--json")
	if !strings.Contains(list, `"role": "billing"`) || !strings.Contains(list, `"status": "suspended"`) {
		t.Fatalf("member list --json printed %q", list)
	}
	h.ok("member", "activate", "--account", "a@example.com", "--email", "dev@example.com")
	h.fails("at least one active owner", "member", "role", "--account", "a@example.com", "--email", "a@example.com", "--role", "admin")
	h.fails("at least one active owner", "member", "remove", "--account", "a@example.com", "--email", "a@example.com")
	h.ok("member", "remove", "--account", "a@example.com", "--email", "dev@example.com")
	h.fails("No member of this account", "member", "remove", "--account", "a@example.com", "--email", "dev@example.com")
	h.fails("needs --account EMAIL --email EMAIL --role ROLE", "member", "role", "--account", "a@example.com", "--email", "a@example.com")
}
