package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// The people of an account: listed, invited, given a role, suspended and
// removed through the same service as the dashboard's and the API's.

func runMemberList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account")
	asJSON := f.fs.Bool("json", false, "print the members and pending invitations as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if *account == "" {
		return usagef("member list needs --account EMAIL")
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	ms, err := svc.ListMembers(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	invs, err := svc.ListInvitations(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	out := struct {
		Members     []manage.MemberJSON     `json:"members"`
		Invitations []manage.InvitationJSON `json:"invitations"`
	}{[]manage.MemberJSON{}, []manage.InvitationJSON{}}
	for _, m := range ms {
		out.Members = append(out.Members, manage.MemberView(m))
	}
	for _, inv := range invs {
		out.Invitations = append(out.Invitations, manage.InvitationView(inv))
	}
	if *asJSON {
		return writeJSON(e.stdout, out)
	}
	for _, m := range out.Members {
		fmt.Fprintf(e.stdout, "%s  %-30s  %-9s  %-9s  %s\n", m.ID, m.Email, m.Role, m.Status, m.Name)
	}
	for _, inv := range out.Invitations {
		fmt.Fprintf(e.stdout, "%s  %-30s  %-9s  invited, expires %s\n", inv.ID, inv.Email, inv.Role, inv.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return nil
}

func runMemberInvite(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account")
	email := f.fs.String("email", "", "email of the person to invite")
	role := f.fs.String("role", "", "owner, admin, developer, viewer or billing")
	expires := f.fs.Duration("expires-in", manage.DefaultInvitationTTL, "how long the link works (at most 720h)")
	asJSON := f.fs.Bool("json", false, "print the invitation and its secret as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if *account == "" || *email == "" || *role == "" {
		return usagef("member invite needs --account EMAIL --email EMAIL --role ROLE")
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	got, err := svc.Invite(ctx, cliActor, manage.InviteRequest{AccountID: a.ID, Email: *email, Role: *role, TTL: *expires})
	if err != nil {
		return serviceError(err)
	}
	inv, secret := got.Invitation, got.Secret
	v := manage.InvitationView(inv)
	v.Secret, v.MailSent = secret, &got.MailSent
	return writeShownOnce(e, fmt.Sprintf("invited %s as %s; %sthe invitee opens the dashboard's /invitations/<secret> before %s; the secret is shown only this once",
		inv.Email, inv.Role, mailFact(got), inv.ExpiresAt.UTC().Format(time.RFC3339)), secret, *asJSON, v)
}

// mailFact says whether the invitation's mail went ("" without SMTP).
func mailFact(got manage.Invited) string {
	switch {
	case got.MailSent:
		return "a mail with the link was sent to " + got.Invitation.Email + "; "
	case got.Mailed:
		return "the mail could not be sent (see the log): share the link; "
	}
	return ""
}

// memberCommand runs one change of a member named by its account's and
// its own email.
// withRole adds --role, the new role, which the change is given.
func memberCommand(name string, withRole bool, change func(ctx context.Context, svc *manage.Service, m store.Member, role string) (string, error)) func(context.Context, *env, *flags, []string) error {
	return func(ctx context.Context, e *env, f *flags, args []string) error {
		account := f.fs.String("account", "", "email of the account")
		email := f.fs.String("email", "", "email of the member")
		role := new(string)
		if withRole {
			role = f.fs.String("role", "", "owner, admin, developer, viewer or billing")
		}
		if _, err := f.parse(args); err != nil {
			return err
		}
		if *account == "" || *email == "" || withRole && *role == "" {
			synopsis := "--account EMAIL --email EMAIL"
			if withRole {
				synopsis += " --role ROLE"
			}
			return usagef("member %s needs %s", name, synopsis)
		}
		svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
		if err != nil {
			return err
		}
		defer done()
		m, err := svc.MemberByEmail(ctx, cliActor, a.ID, *email)
		if err != nil {
			return serviceError(err)
		}
		said, err := change(ctx, svc, m, *role)
		if err != nil {
			return serviceError(err)
		}
		fmt.Fprintf(e.stderr, "tollgate: %s %s\n", said, m.Email)
		return nil
	}
}

var (
	runMemberRole = memberCommand("role", true, func(ctx context.Context, svc *manage.Service, m store.Member, role string) (string, error) {
		_, err := svc.SetMemberRole(ctx, cliActor, m.ID, role)
		return "made " + role + ":", err
	})
	runMemberSuspend = memberCommand("suspend", false, func(ctx context.Context, svc *manage.Service, m store.Member, _ string) (string, error) {
		_, err := svc.SetMemberStatus(ctx, cliActor, m.ID, store.MemberSuspended)
		return "suspended (sessions and tokens ended)", err
	})
	runMemberActivate = memberCommand("activate", false, func(ctx context.Context, svc *manage.Service, m store.Member, _ string) (string, error) {
		_, err := svc.SetMemberStatus(ctx, cliActor, m.ID, store.MemberActive)
		return "reactivated", err
	})
	runMemberRemove = memberCommand("remove", false, func(ctx context.Context, svc *manage.Service, m store.Member, _ string) (string, error) {
		return "removed (sessions and tokens ended)", svc.RemoveMember(ctx, cliActor, m.ID)
	})
)
