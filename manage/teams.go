package manage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// Teams group an account's keys for spend: a team's budgets hold every
// request of its keys beside the key's and the account's, and its model
// allow-list bounds its keys' (a key in a team may list only models of
// the team's; one that lists none may use the team's). Read with
// keys:read, changed with keys:write, as keys and budgets are.

// Teams are the store's teams.
type Teams interface {
	CreateTeam(ctx context.Context, t store.Team) (store.Team, error)
	TeamByID(ctx context.Context, id string) (store.Team, error)
	ListTeams(ctx context.Context, accountID string) ([]store.Team, error)
	UpdateTeam(ctx context.Context, t store.Team) (store.Team, error)
	DeleteTeam(ctx context.Context, accountID, id string) error
	SetKeyTeam(ctx context.Context, keyID, teamID string) (store.Key, error)
	SetTeamBudgets(ctx context.Context, accountID, teamID string, budgets []store.Budget) ([]store.Budget, error)
	TeamBudgets(ctx context.Context, accountID, teamID string) ([]store.Budget, error)
	KeyTeams(ctx context.Context, accountID string) (map[string]string, error)
	KeyMakers(ctx context.Context, accountID string) (map[string]string, error)
	AddTeamMember(ctx context.Context, accountID, teamID, memberID string) error
	RemoveTeamMember(ctx context.Context, accountID, teamID, memberID string) error
	TeamMembers(ctx context.Context, teamID string) ([]store.Member, error)
}

// Audit log actions of teams.
const (
	ActionTeamCreate  = "team.create"
	ActionTeamUpdate  = "team.update"
	ActionTeamDelete  = "team.delete"
	ActionTeamBudgets = "team.budgets"
	// ActionTeamMemberAdd and ActionTeamMemberRemove put a member in a
	// team and take it out (the entry's target is the team).
	ActionTeamMemberAdd    = "team.member_add"
	ActionTeamMemberRemove = "team.member_remove"
	ActionKeyTeam          = "key.team"
)

// Team errors.
var (
	ErrTeamNameTaken = oaierror.Error{Status: http.StatusConflict, Code: "team_name_taken", Type: oaierror.TypeInvalidRequest,
		Message: "This account has a team of that name already: choose another.", Param: "name"}
	ErrTeamNotEmpty = oaierror.Error{Status: http.StatusConflict, Code: "team_not_empty", Type: oaierror.TypeInvalidRequest,
		Message: "Keys are in this team: move them out of it before deleting it."}
)

// MaxTeamName bounds a team's name, in bytes.
const MaxTeamName = 100

// TeamInput is what a create or an update sets: a nil field is left as
// it is (a create needs a name). Models points to nil for every model.
type TeamInput struct {
	Name   *string
	Models *[]string
}

// ListTeams are the account's teams, by name.
func (s *Service) ListTeams(ctx context.Context, a Actor, accountID string) ([]store.Team, error) {
	if _, err := s.account(ctx, a, accountID, OpTeamsRead); err != nil {
		return nil, err
	}
	ts, err := s.opt.Store.ListTeams(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "list teams", err)
	}
	return ts, nil
}

// GetTeam returns one team.
func (s *Service) GetTeam(ctx context.Context, a Actor, id string) (store.Team, error) {
	return s.team(ctx, a, id, OpTeamsRead)
}

// team returns a team the actor may act on with op; another account's
// team is not found.
func (s *Service) team(ctx context.Context, a Actor, id string, op Op) (store.Team, error) {
	if sc := opScope[op]; sc != "" && !a.can(sc) {
		return store.Team{}, ErrScope
	}
	t, err := s.opt.Store.TeamByID(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Team{}, ErrNotFound
	case err != nil:
		return store.Team{}, s.fail(ctx, "team lookup", err)
	}
	if !a.Admin() && t.AccountID != a.AccountID {
		return store.Team{}, ErrNotFound
	}
	if !a.may(op) {
		return store.Team{}, ErrPermission
	}
	return t, nil
}

// CreateTeam makes a team of the account: a name unique in it, and a
// model allow-list (nil: every model of the plan).
func (s *Service) CreateTeam(ctx context.Context, a Actor, accountID string, in TeamInput) (store.Team, error) {
	acct, err := s.account(ctx, a, accountID, OpTeamsWrite)
	if err != nil {
		return store.Team{}, err
	}
	if in.Name == nil {
		return store.Team{}, oaierror.Invalid("invalid_request", "name", "A team needs a name.")
	}
	t := store.Team{AccountID: acct.ID}
	if err := s.teamFields(acct, &t, in); err != nil {
		return store.Team{}, err
	}
	t, err = s.opt.Store.CreateTeam(ctx, t)
	switch {
	case errors.Is(err, store.ErrConflict):
		return store.Team{}, ErrTeamNameTaken
	case err != nil:
		return store.Team{}, s.fail(ctx, "create team", err)
	}
	s.auditWith(ctx, a, acct.ID, ActionTeamCreate, t.ID, AuditDetail{Name: t.Name,
		Changes: map[string][2]string{keyopts.FieldModels: {"", modelsText(t.Models)}}})
	return t, nil
}

// teamFields checks in and applies it to t: a name of 1 to MaxTeamName
// printable bytes, an allow-list by keyopts' rules and within the plan.
func (s *Service) teamFields(acct store.Account, t *store.Team, in TeamInput) error {
	if in.Name != nil {
		name := strings.TrimSpace(*in.Name)
		if name == "" || len(name) > MaxTeamName || strings.ContainsFunc(name, unicode.IsControl) {
			return oaierror.Invalid("invalid_request", "name", fmt.Sprintf("A team's name is 1 to %d characters, none of them control characters.", MaxTeamName))
		}
		t.Name = name
	}
	if in.Models != nil {
		cfg := s.opt.Config()
		models, err := keyopts.Models(*in.Models, s.rules(cfg).KnownModel)
		if err != nil {
			return invalid(err)
		}
		if err := inPlan(cfg, acct, keyopts.Patch{Models: &models}); err != nil {
			return err
		}
		t.Models = models
	}
	return nil
}

// UpdateTeam renames a team or replaces its allow-list. An allow-list that
// would leave out a model one of its keys lists is refused: narrow the
// key's list first.
func (s *Service) UpdateTeam(ctx context.Context, a Actor, id string, in TeamInput) (store.Team, error) {
	t, err := s.team(ctx, a, id, OpTeamsWrite)
	if err != nil {
		return store.Team{}, err
	}
	acct, err := s.account(ctx, a, t.AccountID, OpTeamsWrite)
	if err != nil {
		return store.Team{}, err
	}
	before := t
	if err := s.teamFields(acct, &t, in); err != nil {
		return store.Team{}, err
	}
	if in.Models != nil && t.Models != nil {
		keys, err := s.opt.Store.ListKeys(ctx, t.AccountID)
		if err != nil {
			return store.Team{}, s.fail(ctx, "list keys", err)
		}
		for _, k := range keys {
			if k.TeamID != t.ID {
				continue
			}
			if m, ok := outside(k.Models, t.Models); !ok {
				return store.Team{}, oaierror.Invalid("invalid_request", keyopts.FieldModels, fmt.Sprintf(
					"The team's key %s lists %q, which this allow-list leaves out: take it off the key's list first.", k.ID, oaierror.Clip(m, 100)))
			}
		}
	}
	t, err = s.opt.Store.UpdateTeam(ctx, t)
	switch {
	case errors.Is(err, store.ErrConflict):
		return store.Team{}, ErrTeamNameTaken
	case errors.Is(err, store.ErrNotFound):
		return store.Team{}, ErrNotFound
	case err != nil:
		return store.Team{}, s.fail(ctx, "update team", err)
	}
	s.opt.AccountChanged(t.AccountID)
	changes := map[string][2]string{}
	if before.Name != t.Name {
		changes["name"] = [2]string{before.Name, t.Name}
	}
	if was, is := modelsText(before.Models), modelsText(t.Models); was != is {
		changes[keyopts.FieldModels] = [2]string{was, is}
	}
	s.auditWith(ctx, a, t.AccountID, ActionTeamUpdate, t.ID, AuditDetail{Name: t.Name, Changes: changes})
	return t, nil
}

// DeleteTeam deletes a team with no keys, and its budgets.
func (s *Service) DeleteTeam(ctx context.Context, a Actor, id string) error {
	t, err := s.team(ctx, a, id, OpTeamsWrite)
	if err != nil {
		return err
	}
	switch err := s.opt.Store.DeleteTeam(ctx, t.AccountID, t.ID); {
	case errors.Is(err, store.ErrTeamNotEmpty):
		return ErrTeamNotEmpty
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "delete team", err)
	}
	s.opt.AccountChanged(t.AccountID)
	s.auditWith(ctx, a, t.AccountID, ActionTeamDelete, t.ID, AuditDetail{Name: t.Name})
	return nil
}

// SetKeyTeam moves a key into a team of its account (teamID set) or out
// of its team (""). A key whose allow-list names a model the team's does
// not is refused: its list must be a subset of the team's.
func (s *Service) SetKeyTeam(ctx context.Context, a Actor, keyID, teamID string) (store.Key, error) {
	k, err := s.key(ctx, a, keyID, OpTeamsWrite)
	if err != nil {
		return store.Key{}, err
	}
	var t store.Team
	if teamID != "" {
		if t, err = s.team(ctx, a, teamID, OpTeamsWrite); err != nil {
			return store.Key{}, err
		}
		if t.AccountID != k.AccountID {
			return store.Key{}, ErrNotFound // a team of another account is none of this key's
		}
		if err := withinTeam(k.Models, t); err != nil {
			return store.Key{}, err
		}
	}
	before := k.TeamID
	k, err = s.opt.Store.SetKeyTeam(ctx, k.ID, teamID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Key{}, ErrNotFound
	case err != nil:
		return store.Key{}, s.fail(ctx, "set key team", err)
	}
	s.opt.KeyChanged(k.ID)
	s.auditWith(ctx, a, k.AccountID, ActionKeyTeam, k.ID, AuditDetail{Name: k.Description,
		Changes: map[string][2]string{"team_id": {before, teamID}}})
	return k, nil
}

// TeamBudgets reads a team's budgets with their current windows.
func (s *Service) TeamBudgets(ctx context.Context, a Actor, teamID string) (BudgetReport, error) {
	t, err := s.team(ctx, a, teamID, OpBudgetsRead)
	if err != nil {
		return BudgetReport{}, err
	}
	return s.report(ctx, t.AccountID, func() ([]store.Budget, error) { return s.opt.Store.TeamBudgets(ctx, t.AccountID, t.ID) })
}

// SetTeamBudgets replaces a team's budgets (none removes them all).
func (s *Service) SetTeamBudgets(ctx context.Context, a Actor, teamID string, budgets []store.Budget) (BudgetReport, error) {
	t, err := s.team(ctx, a, teamID, OpBudgetsWrite)
	if err != nil {
		return BudgetReport{}, err
	}
	if err := checkBudgets(budgets); err != nil {
		return BudgetReport{}, err
	}
	before, err := s.opt.Store.TeamBudgets(ctx, t.AccountID, t.ID)
	if err != nil {
		return BudgetReport{}, s.fail(ctx, "team budgets", err)
	}
	after, err := s.opt.Store.SetTeamBudgets(ctx, t.AccountID, t.ID, budgets)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return BudgetReport{}, ErrNotFound
	case err != nil:
		return BudgetReport{}, s.fail(ctx, "set team budgets", err)
	}
	s.opt.AccountChanged(t.AccountID)
	s.auditWith(ctx, a, t.AccountID, ActionTeamBudgets, t.ID, AuditDetail{Name: t.Name, Changes: budgetChanges(before, after)})
	return s.report(ctx, t.AccountID, func() ([]store.Budget, error) { return after, nil })
}

// CheckKeyTeam checks that a key of the allow-list models (nil: every
// model) may be in the team, as SetKeyTeam would, and saves nothing: a
// form that sets a key's options and its team asks it before it writes
// either.
func (s *Service) CheckKeyTeam(ctx context.Context, a Actor, accountID, teamID string, models []string) error {
	t, err := s.team(ctx, a, teamID, OpTeamsWrite)
	if err != nil {
		return err
	}
	if t.AccountID != accountID {
		return ErrNotFound
	}
	return withinTeam(models, t)
}

// keyWithinTeam refuses an allow-list that key k, if in a team, may not
// have (withinTeam).
func (s *Service) keyWithinTeam(ctx context.Context, k store.Key, models []string) error {
	if k.TeamID == "" {
		return nil
	}
	t, err := s.opt.Store.TeamByID(ctx, k.TeamID)
	if err != nil {
		return s.fail(ctx, "team lookup", err)
	}
	return withinTeam(models, t)
}

// withinTeam refuses a key's allow-list that names a model its team's
// does not (a key's "every model" is the team's list).
func withinTeam(models []string, t store.Team) error {
	if m, ok := outside(models, t.Models); !ok {
		return &OptionsError{Fields: keyopts.Errors{{Field: keyopts.FieldModels,
			Message: fmt.Sprintf("%q is not in the allow-list of the key's team %q (%s)", oaierror.Clip(m, 100), t.Name, modelsText(t.Models))}}}
	}
	return nil
}

// outside is the first of models that bound (nil: every model) leaves
// out; ok when there is none.
func outside(models, bound []string) (string, bool) {
	if bound == nil {
		return "", true
	}
	for _, m := range models {
		if !slices.Contains(bound, m) {
			return m, false
		}
	}
	return "", true
}

// TeamJSON is a team on the wire.
type TeamJSON struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	AccountID string `json:"account_id"`
	Name      string `json:"name"`
	// Models is null for every model of the plan.
	Models    []string  `json:"models"`
	CreatedAt time.Time `json:"created_at"`
}

// TeamView is t on the wire.
func TeamView(t store.Team) TeamJSON {
	return TeamJSON{ID: t.ID, Object: "team", AccountID: t.AccountID, Name: t.Name, Models: t.Models, CreatedAt: t.CreatedAt.UTC()}
}

// TeamUsage is one team's share of an account's usage: the records of the
// keys in it now (a key moved keeps its usage with it), refusals not
// counted. TeamID "" is the keys in no team.
type TeamUsage struct {
	TeamID, Name string
	Requests     int64
	Cost         money.Nanos
}

// MemberUsage is one member's share of an account's usage: the records
// of the keys it made (deleted ones included), refusals not counted.
// MemberID "" is the keys no member made (the operator's: the CLI, an
// admin token, or before members).
type MemberUsage struct {
	MemberID, Name, Email string
	Requests              int64
	Cost                  money.Nanos
}

// UsageSplit splits the account's usage r selects by team and by member
// (see splitUsage).
func (s *Service) UsageSplit(ctx context.Context, a Actor, r UsageRequest) ([]TeamUsage, []MemberUsage, error) {
	r.KeyID = ""
	q, err := s.usageQuery(ctx, a, r)
	if err != nil {
		return nil, nil, err
	}
	return s.splitUsage(ctx, a, q)
}

// splitUsage splits an account's usage by its keys' teams (teams by name,
// the keys in none last) and by the members who made them (oldest member
// first, the keys of no one last). With keys.read.own only, the actor's
// own keys alone are counted. A key's usage is not split.
func (s *Service) splitUsage(ctx context.Context, a Actor, q store.UsageQuery) ([]TeamUsage, []MemberUsage, error) {
	if q.KeyID != "" {
		return []TeamUsage{}, []MemberUsage{}, nil
	}
	totals, err := s.opt.Store.KeyTotals(ctx, q)
	if err != nil {
		return nil, nil, s.fail(ctx, "key totals", err)
	}
	makerOf, err := s.opt.Store.KeyMakers(ctx, q.AccountID)
	if err != nil {
		return nil, nil, s.fail(ctx, "key makers", err)
	}
	if !a.may(OpKeysRead) {
		maps.DeleteFunc(totals, func(id string, _ store.KeyTotal) bool {
			return a.MemberID == "" || makerOf[id] != a.MemberID
		})
	}
	byTeam, err := s.byTeam(ctx, q.AccountID, totals)
	if err != nil {
		return nil, nil, err
	}
	members, err := s.opt.Store.ListMembers(ctx, q.AccountID)
	if err != nil {
		return nil, nil, s.fail(ctx, "list members", err)
	}
	sums := sumBy(totals, makerOf)
	byMember := []MemberUsage{}
	for _, m := range members { // oldest first
		if u, ok := sums[m.ID]; ok {
			byMember = append(byMember, MemberUsage{MemberID: m.ID, Name: m.Name, Email: m.Email, Requests: u.Requests, Cost: u.Cost})
			delete(sums, m.ID)
		}
	}
	var gone MemberUsage // the keys of no one, and of members removed since
	for _, u := range sums {
		gone.Requests += u.Requests
		gone.Cost = money.Add(gone.Cost, u.Cost)
	}
	if len(sums) > 0 {
		byMember = append(byMember, gone)
	}
	return byTeam, byMember, nil
}

// byTeam splits an account's key totals by its keys' teams, teams by
// name, the keys in none last.
func (s *Service) byTeam(ctx context.Context, accountID string, totals map[string]store.KeyTotal) ([]TeamUsage, error) {
	teamOf, err := s.opt.Store.KeyTeams(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "key teams", err)
	}
	teams, err := s.opt.Store.ListTeams(ctx, accountID)
	if err != nil {
		return nil, s.fail(ctx, "list teams", err)
	}
	sums := sumBy(totals, teamOf)
	out := []TeamUsage{}
	for _, t := range teams { // by name
		if u, ok := sums[t.ID]; ok {
			out = append(out, TeamUsage{TeamID: t.ID, Name: t.Name, Requests: u.Requests, Cost: u.Cost})
		}
	}
	if u, ok := sums[""]; ok {
		out = append(out, TeamUsage{Requests: u.Requests, Cost: u.Cost})
	}
	return out, nil
}

// sumBy sums the keys' totals by the group groupOf gives each key ("" for
// a key it does not name).
func sumBy(totals map[string]store.KeyTotal, groupOf map[string]string) map[string]store.KeyTotal {
	out := map[string]store.KeyTotal{}
	for id, t := range totals {
		g := out[groupOf[id]]
		g.Requests += t.Requests
		g.Cost = money.Add(g.Cost, t.Cost)
		out[groupOf[id]] = g
	}
	return out
}

// TeamMembers lists the people in a team, oldest first (no password
// hashes). Membership groups people; it changes nothing their roles allow.
func (s *Service) TeamMembers(ctx context.Context, a Actor, teamID string) ([]store.Member, error) {
	t, err := s.team(ctx, a, teamID, OpMembersRead)
	if err != nil {
		return nil, err
	}
	ms, err := s.opt.Store.TeamMembers(ctx, t.ID)
	if err != nil {
		return nil, s.fail(ctx, "team members", err)
	}
	for i := range ms {
		ms[i].PasswordHash = ""
	}
	return ms, nil
}

// AddTeamMember puts a member of the team's account in the team (one in
// it already stays, and nothing is audited).
func (s *Service) AddTeamMember(ctx context.Context, a Actor, teamID, memberID string) error {
	return s.changeTeamMember(ctx, a, teamID, memberID, true)
}

// RemoveTeamMember takes a member out of a team (ErrNotFound if it is not
// in it).
func (s *Service) RemoveTeamMember(ctx context.Context, a Actor, teamID, memberID string) error {
	return s.changeTeamMember(ctx, a, teamID, memberID, false)
}

func (s *Service) changeTeamMember(ctx context.Context, a Actor, teamID, memberID string, add bool) error {
	t, err := s.team(ctx, a, teamID, OpTeamMembers)
	if err != nil {
		return err
	}
	in, err := s.opt.Store.TeamMembers(ctx, t.ID)
	if err != nil {
		return s.fail(ctx, "team members", err)
	}
	i := slices.IndexFunc(in, func(m store.Member) bool { return m.ID == memberID })
	if add && i >= 0 {
		return nil
	}
	action, do := ActionTeamMemberAdd, s.opt.Store.AddTeamMember
	if !add {
		action, do = ActionTeamMemberRemove, s.opt.Store.RemoveTeamMember
	}
	err = do(ctx, t.AccountID, t.ID, memberID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return ErrNotFound
	case err != nil:
		return s.fail(ctx, "team member", err)
	}
	s.auditWith(ctx, a, t.AccountID, action, t.ID, AuditDetail{Name: t.Name, Changes: map[string][2]string{"member_id": teamMemberChange(memberID, add)}})
	return nil
}

// teamMemberChange is the audit's change of a team's member: from none to
// it, or from it to none.
func teamMemberChange(memberID string, add bool) [2]string {
	if add {
		return [2]string{"", memberID}
	}
	return [2]string{memberID, ""}
}
