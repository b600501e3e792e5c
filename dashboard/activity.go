package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The activity page: the account's audit log (every key and token action,
// by the dashboard, the management API or the CLI), newest first, a page
// at a time, filtered by action and by days; each entry names its object
// and actor, links to them while they exist, and says what changed.

// activityPageSize is how many entries one page shows.
const activityPageSize = 50

// activityActions are the actions the filter offers, with their sentences.
var activityActions = []struct{ Value, Label string }{
	{manage.ActionKeyCreate, "Key created"}, {manage.ActionKeyUpdate, "Key changed"},
	{manage.ActionKeyEnable, "Key enabled"}, {manage.ActionKeyDisable, "Key disabled"},
	{manage.ActionKeyRotate, "Key secret rotated"}, {manage.ActionKeyDelete, "Key deleted"},
	{manage.ActionTokenCreate, "Token created"}, {manage.ActionTokenRevoke, "Token revoked"},
	{manage.ActionAccountCreate, "Account opened"}, {manage.ActionAccountCredit, "Credit added"},
	{manage.ActionAccountPlan, "Plan changed"}, {manage.ActionAccountPassword, "Password set"},
	{manage.ActionKeyBudgets, "Key budgets set"}, {manage.ActionAccountBudgets, "Account budgets set"},
	{manage.ActionAccountAlerts, "Low balance threshold set"}, {manage.ActionWebhookCreate, "Webhook added"},
	{manage.ActionWebhookEnable, "Webhook enabled"}, {manage.ActionWebhookDisable, "Webhook disabled"},
	{manage.ActionWebhookTest, "Webhook tested"}, {manage.ActionWebhookDelete, "Webhook deleted"},
	{manage.ActionMemberInvite, "Person invited"}, {manage.ActionMemberWithdraw, "Invitation withdrawn"},
	{manage.ActionMemberJoin, "Person joined"}, {manage.ActionMemberRole, "Role changed"},
	{manage.ActionMemberSuspend, "Person suspended"}, {manage.ActionMemberActivate, "Person reactivated"},
	{manage.ActionMemberRemove, "Person removed"},
}

// personOption is a member the activity's filter offers.
type personOption struct{ Value, Label string }

type activityRow struct {
	When       shownTime
	Who        string
	WhoLink    string
	What       string
	Action     string
	Target     string
	TargetName string
	TargetLink string
	Changes    []activityChange
	From       string
}

type activityChange struct {
	Field, Before, After string
}

type activityPage struct {
	Entries []activityRow
	// Older links to the next page; "" on the last.
	Older string
	// The filters as the form shows them, and the error of a bad date.
	Action, From, To, Error string
	Actions                 any
	// Member is the person whose entries are shown ("" for everyone's),
	// People the account's members the filter offers.
	Member   string
	People   []personOption
	Filtered bool
}

// activityNames are the account's keys and tokens by id, to name and link
// the entries' objects and actors.
type activityNames struct {
	keys, tokens, members map[string]string
	// me is the signed-in member's id.
	me string
}

func (d *Dashboard) listActivity(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	out := activityPage{Entries: []activityRow{}, Actions: activityActions, Action: q.Get("action"),
		From: strings.TrimSpace(q.Get("from")), To: strings.TrimSpace(q.Get("to")), Member: q.Get("member")}
	names, err := d.activityNames(r, s)
	if err != nil {
		return err
	}
	for id, name := range names.members {
		out.People = append(out.People, personOption{Value: id, Label: name})
	}
	slices.SortFunc(out.People, func(a, b personOption) int { return strings.Compare(a.Label, b.Label) })
	if _, ok := names.members[out.Member]; !ok {
		out.Member = ""
	}
	f := out.filter()
	page, err := d.manage.ListAuditWhere(r.Context(), d.actor(r, s), s.account.ID, f, q.Get("after"), activityPageSize)
	if oe := (oaierror.Error{}); errors.As(err, &oe) && oe.Status == http.StatusBadRequest {
		return errNotFound // a cursor this page did not give
	}
	if err != nil {
		return err
	}
	for _, e := range page.Entries {
		out.Entries = append(out.Entries, names.row(e, s.account.ID))
	}
	if page.Next != "" {
		v := out.query()
		v.Set("after", page.Next)
		out.Older = "/activity?" + v.Encode()
	}
	d.render(w, r, http.StatusOK, "activity", s, "Activity", out)
	return nil
}

// filter is the page's filter for the store: an action it offers, and the
// days from From to To (both UTC, To included). A bad date is dropped and
// said in p.Error.
func (p *activityPage) filter() store.AuditFilter {
	var f store.AuditFilter
	if !slices.ContainsFunc(activityActions, func(a struct{ Value, Label string }) bool { return a.Value == p.Action }) {
		p.Action = ""
	}
	f.Action = p.Action
	f.MemberID = p.Member
	for _, b := range []struct {
		text *string
		into *time.Time
		days int
	}{{&p.From, &f.From, 0}, {&p.To, &f.To, 1}} {
		if *b.text == "" {
			continue
		}
		day, err := time.Parse(dateLayout, *b.text)
		if err != nil {
			p.Error = "Dates are days, as YYYY-MM-DD; “" + oaierror.Clip(*b.text, 40) + "” is not one, so it was left out."
			*b.text = ""
			continue
		}
		*b.into = day.AddDate(0, 0, b.days)
	}
	p.Filtered = f != store.AuditFilter{}
	return f
}

// query is the page's filters as a query string.
func (p *activityPage) query() url.Values {
	v := url.Values{}
	for k, val := range map[string]string{"action": p.Action, "from": p.From, "to": p.To, "member": p.Member} {
		if val != "" {
			v.Set(k, val)
		}
	}
	return v
}

func (d *Dashboard) activityNames(r *http.Request, s *session) (activityNames, error) {
	n := activityNames{keys: map[string]string{}, tokens: map[string]string{}, members: map[string]string{}, me: s.actor.MemberID}
	members, err := d.manage.ListMembers(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return n, err
	}
	for _, m := range members {
		n.members[m.ID] = cmpOr(m.Name, m.Email)
	}
	keys, err := d.manage.AccountKeys(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return n, err
	}
	for _, k := range keys {
		n.keys[k.ID] = k.Description
	}
	tokens, err := d.manage.ListTokens(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return n, err
	}
	for _, t := range tokens {
		n.tokens[t.ID] = t.Name
	}
	return n, nil
}

// row is an entry as the page shows it.
func (n activityNames) row(e store.AuditEntry, own string) activityRow {
	from := e.Address
	if from == "" {
		from = "—"
	}
	row := activityRow{When: timeShown(&e.At, func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }),
		Action: e.Action, What: e.Action, Target: e.Target, From: from}
	for _, a := range activityActions {
		if a.Value == e.Action {
			row.What = a.Label
		}
	}
	row.Who, row.WhoLink = n.actor(e, own)
	detail, _ := manage.ParseAuditDetail(e.Detail)
	row.TargetName = detail.Name
	switch {
	case strings.HasPrefix(e.Action, "key."):
		if name, ok := n.keys[e.Target]; ok {
			row.TargetLink = "/keys/" + e.Target
			row.TargetName = cmpOr(row.TargetName, name)
		}
	case strings.HasPrefix(e.Action, "token."):
		if name, ok := n.tokens[e.Target]; ok {
			row.TargetLink = "/tokens"
			row.TargetName = cmpOr(row.TargetName, name)
		}
	case strings.HasPrefix(e.Action, "member."):
		if name, ok := n.members[e.Target]; ok {
			row.TargetLink = "/members"
			row.TargetName = cmpOr(row.TargetName, name)
		}
	}
	row.Changes = changesOf(detail.Changes)
	return row
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// actor names an audit entry's actor for a person: the member who acted
// ("You" for the signed-in one) and its door, with a link to the token it
// used while that exists.
func (n activityNames) actor(e store.AuditEntry, own string) (string, string) {
	who := ""
	switch {
	case e.MemberID == "":
	case e.MemberID == n.me:
		who = "You"
	case n.members[e.MemberID] != "":
		who = n.members[e.MemberID]
	default:
		who = "Former member " + e.MemberID
	}
	if who != "" && e.SSOSubject != "" {
		who += ", single sign-on"
	}
	switch {
	case e.Actor == manage.ActorCLI:
		return "Administrator (CLI)", ""
	case e.Actor == manage.ActorUser+":"+own && who == "":
		return "You (dashboard)", "" // an entry of before members
	case strings.HasPrefix(e.Actor, manage.ActorUser+":"):
		return cmpOr(who, "Account holder") + " (dashboard)", ""
	case strings.HasPrefix(e.Actor, manage.ActorToken+":"):
		id := strings.TrimPrefix(e.Actor, manage.ActorToken+":")
		token := "token " + id
		link := ""
		if name, ok := n.tokens[id]; ok {
			token, link = "token “"+name+"” ("+id+")", "/tokens"
		}
		if who != "" {
			return who + " (API, " + token + ")", link
		}
		return "Token" + strings.TrimPrefix(token, "token"), link
	}
	return e.Actor, ""
}
