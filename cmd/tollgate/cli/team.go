package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/tollgate/tollgate/manage"
)

// The team commands: an account's teams of keys, their budgets and their
// keys, through the same service as the API's /api/v1/teams; --json
// prints the API's views.

func runTeamCreate(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account the team is of")
	name := f.fs.String("name", "", "the team's name, unique in the account (1-100 characters)")
	models := f.list("model", "model the team's keys may use (repeatable; default every model of the plan)")
	asJSON := f.fs.Bool("json", false, "print the team as JSON")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account", "name"); err != nil {
		return err
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	in := manage.TeamInput{Name: name}
	if models.set {
		in.Models = &models.values
	}
	t, err := svc.CreateTeam(ctx, cliActor, a.ID, in)
	if err != nil {
		return serviceError(err)
	}
	return printTeam(e, t.ID, manage.TeamView(t), *asJSON)
}

func runTeamList(ctx context.Context, e *env, f *flags, args []string) error {
	account := f.fs.String("account", "", "email of the account whose teams to list")
	asJSON := f.fs.Bool("json", false, "print the teams as a JSON array")
	if _, err := f.parse(args); err != nil {
		return err
	}
	if err := f.require("account"); err != nil {
		return err
	}
	svc, a, done, err := openForAccount(ctx, e, f, openService, *account)
	if err != nil {
		return err
	}
	defer done()
	ts, err := svc.ListTeams(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	keys, err := svc.AccountKeys(ctx, cliActor, a.ID)
	if err != nil {
		return serviceError(err)
	}
	views := make([]manage.TeamJSON, len(ts))
	for i, t := range ts {
		views[i] = manage.TeamView(t)
	}
	if *asJSON {
		return writeJSON(e.stdout, views)
	}
	count := map[string]int{}
	for _, k := range keys {
		count[k.TeamID]++
	}
	for _, v := range views {
		fmt.Fprintf(e.stdout, "%s  %-20s  %3d keys  models: %s\n", v.ID, v.Name, count[v.ID], teamModels(v.Models))
	}
	return nil
}

func runTeamUpdate(ctx context.Context, e *env, f *flags, args []string) error {
	name := f.fs.String("name", "", "the team's new name")
	models := f.list("model", "model the team's keys may use (repeatable; replaces the list)")
	allModels := f.fs.Bool("all-models", false, "let the team's keys use every model of the plan")
	asJSON := f.fs.Bool("json", false, "print the team as JSON")
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	var in manage.TeamInput
	if f.given("name") {
		in.Name = name
	}
	switch {
	case models.set && f.given("all-models"):
		return usagef("%s: give --model or --all-models, not both", f.cmd.name)
	case models.set:
		in.Models = &models.values
	case f.given("all-models") && *allModels:
		in.Models = new([]string)
	}
	if in.Name == nil && in.Models == nil {
		return usagef("%s: nothing to change: give --name, --model or --all-models", f.cmd.name)
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	t, err := svc.UpdateTeam(ctx, cliActor, pos[0], in)
	if err != nil {
		return notFound(err, "no team with id %q", pos[0])
	}
	return printTeam(e, t.ID, manage.TeamView(t), *asJSON)
}

func runTeamDelete(ctx context.Context, e *env, f *flags, args []string) error {
	pos, err := f.parse(args, "ID")
	if err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	if err := svc.DeleteTeam(ctx, cliActor, pos[0]); err != nil {
		return notFound(err, "no team with id %q", pos[0])
	}
	_, err = fmt.Fprintf(e.stdout, "deleted team %s\n", pos[0])
	return err
}

// runTeamAdd moves a key into a team; runTeamRemove moves it out.
func runTeamAdd(ctx context.Context, e *env, f *flags, args []string) error {
	return moveKey(ctx, e, f, args, true)
}

func runTeamRemove(ctx context.Context, e *env, f *flags, args []string) error {
	return moveKey(ctx, e, f, args, false)
}

func moveKey(ctx context.Context, e *env, f *flags, args []string, in bool) error {
	asJSON := f.fs.Bool("json", false, "print the key as JSON")
	pos, err := f.parse(args, "ID", "KEY_ID")
	if err != nil {
		return err
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	teamID, keyID := pos[0], pos[1]
	if _, err := svc.GetTeam(ctx, cliActor, teamID); err != nil {
		return notFound(err, "no team with id %q", teamID)
	}
	to := teamID
	if !in {
		k, err := svc.GetKey(ctx, cliActor, keyID)
		if err != nil {
			return notFound(err, "no key with id %q", keyID)
		}
		if k.TeamID != teamID {
			return fmt.Errorf("key %s is not in team %s", keyID, teamID)
		}
		to = ""
	}
	k, err := svc.SetKeyTeam(ctx, cliActor, keyID, to)
	if err != nil {
		return notFound(err, "no key with id %q", keyID)
	}
	if *asJSON {
		return writeJSON(e.stdout, manage.KeyView(k, e.now()))
	}
	if in {
		_, err = fmt.Fprintf(e.stdout, "key %s is in team %s\n", keyID, teamID)
	} else {
		_, err = fmt.Fprintf(e.stdout, "key %s left team %s\n", keyID, teamID)
	}
	return err
}

// printTeam prints a team as a line, or as the API's JSON.
func printTeam(e *env, id string, v manage.TeamJSON, asJSON bool) error {
	if asJSON {
		return writeJSON(e.stdout, v)
	}
	_, err := fmt.Fprintf(e.stdout, "%s  %s  models: %s\n", id, v.Name, teamModels(v.Models))
	return err
}

// teamModels is a team's allow-list as the CLI shows it.
func teamModels(models []string) string {
	if models == nil {
		return "all"
	}
	return strings.Join(models, ", ")
}

// runTeamMember lists a team's people, or adds or removes one (by email).
// Being in a team changes nothing a member's role allows.
func runTeamMember(ctx context.Context, e *env, f *flags, args []string) error {
	email := f.fs.String("email", "", "email of the member of the team's account (add, remove)")
	asJSON := f.fs.Bool("json", false, "print the team's people as a JSON array")
	pos, err := f.parse(args, "ACTION", "ID")
	if err != nil {
		return err
	}
	action, teamID := pos[0], pos[1]
	switch action {
	case "list":
	case "add", "remove":
		if *email == "" {
			return usagef("team member %s needs --email EMAIL", action)
		}
	default:
		return usagef("team member needs an action: add, remove or list")
	}
	svc, done, err := openService(ctx, e, f)
	if err != nil {
		return err
	}
	defer done()
	t, err := svc.GetTeam(ctx, cliActor, teamID)
	if err != nil {
		return notFound(err, "no team with id %q", teamID)
	}
	if action != "list" {
		m, err := svc.MemberByEmail(ctx, cliActor, t.AccountID, *email)
		if err != nil {
			return serviceError(err)
		}
		change, said := svc.AddTeamMember, "is in"
		if action == "remove" {
			change, said = svc.RemoveTeamMember, "left"
		}
		if err := change(ctx, cliActor, t.ID, m.ID); err != nil {
			return notFound(err, "%s is not in team "+t.ID, m.Email)
		}
		fmt.Fprintf(e.stderr, "tollgate: %s %s team %s\n", m.Email, said, t.Name)
	}
	ms, err := svc.TeamMembers(ctx, cliActor, t.ID)
	if err != nil {
		return serviceError(err)
	}
	if *asJSON {
		views := make([]manage.MemberJSON, len(ms))
		for i, m := range ms {
			views[i] = manage.MemberView(m)
		}
		return writeJSON(e.stdout, views)
	}
	for _, m := range ms {
		fmt.Fprintf(e.stdout, "%s  %-30s  %s\n", m.ID, m.Email, m.Role)
	}
	return nil
}
