package dashboard

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// keyListPage is the account and a page of its keys.
type keyListPage struct {
	Email   string
	Plan    string
	Balance string
	// Low is set when the balance is $0 or less; AddCredit says where
	// credit is added.
	Low bool
	AddCredit
	// Snippets show an account without keys how a key is used.
	Snippets snippets
	Keys     []keyRow
	// Saved is set after a key was saved (its row is marked).
	Saved bool
	// Deleted is set after a key was deleted.
	Deleted bool
	// The list's query: text, status, order and window, as the form shows them.
	Q, Status, Sort, Window string
	// WindowLabel names the window requests and spend are counted over.
	WindowLabel string
	// Total is how many keys the account has; Matching how many match.
	Total, Matching int
	// Page of Pages; Prev and Next link to the neighbours ("" for none).
	Page, Pages int
	Prev, Next  string
}

// keysPerPage bounds one page of the key list.
const keysPerPage = 50

// keySorts are the list's orders: newest first by default.
var keySorts = []struct{ Value, Label string }{
	{"newest", "Newest first"}, {"oldest", "Oldest first"}, {"description", "Description"},
	{"last_used", "Last used"}, {"spend", "Spend"}, {"requests", "Requests"},
}

// keyWindows are the windows the list counts requests and spend over: the
// last 30 days by default.
var keyWindows = []struct {
	Value, Label string
	D            time.Duration
}{
	{"1d", "the last 24 hours", 24 * time.Hour}, {"7d", "the last 7 days", 7 * 24 * time.Hour},
	{"30d", "the last 30 days", 30 * 24 * time.Hour}, {"90d", "the last 90 days", 90 * 24 * time.Hour},
}

// defaultKeyWindow is the index in keyWindows of the default window.
const defaultKeyWindow = 2

// keyRow is one key as the list shows it.
type keyRow struct {
	ID          string
	Description string
	Hint        string
	Status      string // Enabled, Disabled or Expired
	Enabled     bool
	RateLimit   string
	IPs         string
	Models      string
	ExpiresAt   string
	CreatedAt   string
	// CreatedDate is the day of CreatedAt, which the list shows; CreatedAtISO is for machines.
	CreatedDate  string
	CreatedAtISO string
	LastUsed     string
	// LastUsedAt is "… ago" with the exact time beside it (the list).
	LastUsedAt shownTime
	JustSaved  bool
	// Requests and Spend over the list's window (the list only).
	Requests string
	Spend    string
	// Budget is the fullest spend budget's spend over its amount (budgets.go).
	Budget string
}

// listKeys shows the account and a page of its keys: those matching the
// search (?q= over description, hint and id) and the status filter, in the
// order asked for, with each key's requests and spend over the last 30
// days.
func (d *Dashboard) listKeys(w http.ResponseWriter, r *http.Request, s *session) error {
	keys, err := d.manage.AccountKeys(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return fmt.Errorf("list keys: %w", err)
	}
	now := d.now()
	query := r.URL.Query()
	win := keyWindows[defaultKeyWindow]
	for _, w := range keyWindows {
		if w.Value == query.Get("window") {
			win = w
		}
	}
	// The window up to the end of this hour: whole hours, read from the
	// hourly rollups whatever the number of records.
	to := now.UTC().Truncate(time.Hour).Add(time.Hour)
	totals, err := d.manage.KeyTotals(r.Context(), d.actor(r, s), manage.UsageRequest{AccountID: s.account.ID, From: to.Add(-win.D), To: to})
	if err != nil {
		return fmt.Errorf("key totals: %w", err)
	}
	page := keyListPage{
		Email:   s.account.Email,
		Plan:    s.account.Plan,
		Balance: usd(s.account.Balance),
		Deleted: query.Has("deleted"),
		Q:       strings.TrimSpace(query.Get("q")),
		Status:  query.Get("status"),
		Sort:    query.Get("sort"),
		Total:   len(keys),

		Window:      win.Value,
		WindowLabel: win.Label,

		Low:       s.account.Balance <= 0,
		AddCredit: d.addCredit(),
	}
	if len(keys) == 0 {
		page.Snippets = d.snippetsFor(r, "", d.firstModel(s.account.Plan, nil))
	}
	if !slices.ContainsFunc(keySorts, func(o struct{ Value, Label string }) bool { return o.Value == page.Sort }) {
		page.Sort = "newest"
	}
	switch page.Status {
	case store.StatusEnabled, store.StatusDisabled, store.StatusExpired:
	default:
		page.Status = ""
	}
	matching := page.matching(keys, now)
	sortKeys(matching, page.Sort, totals)
	page.paginate(len(matching), query.Get("page"))
	meters, err := d.budgetMeters(r.Context(), d.actor(r, s), s.account.ID)
	if err != nil {
		return err
	}
	saved := query.Get("saved")
	start := (page.Page - 1) * keysPerPage
	page.Keys = make([]keyRow, 0, keysPerPage)
	for _, k := range matching[start:min(start+keysPerPage, len(matching))] {
		row := keyView(k, now)
		row.Requests, row.Spend = count(totals[k.ID].Requests), usd(totals[k.ID].Cost)
		row.Budget = meters[k.ID]
		if saved != "" && k.ID == saved {
			row.JustSaved = true
			page.Saved = true
		}
		page.Keys = append(page.Keys, row)
	}
	d.render(w, r, http.StatusOK, "keys", s, "API keys", page)
	return nil
}

// matching are the keys of the page's search and status filter.
func (page *keyListPage) matching(keys []store.Key, now time.Time) []store.Key {
	out := keys[:0:0]
	needle := strings.ToLower(page.Q)
	for _, k := range keys {
		if page.Status != "" && k.Status(now) != page.Status {
			continue
		}
		if needle != "" && !strings.Contains(strings.ToLower(k.Description+" "+k.Hint+" "+k.ID), needle) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// paginate sets the page number asked for (within the pages matching keys
// make) and the links to its neighbours.
func (page *keyListPage) paginate(matching int, asked string) {
	page.Matching = matching
	page.Pages = max(1, (matching+keysPerPage-1)/keysPerPage)
	page.Page, _ = strconv.Atoi(asked)
	page.Page = min(max(page.Page, 1), page.Pages)
	link := func(n int) string {
		v := url.Values{"page": {strconv.Itoa(n)}, "sort": {page.Sort}}
		if page.Window != keyWindows[defaultKeyWindow].Value {
			v.Set("window", page.Window)
		}
		if page.Q != "" {
			v.Set("q", page.Q)
		}
		if page.Status != "" {
			v.Set("status", page.Status)
		}
		return "/keys?" + v.Encode()
	}
	if page.Page > 1 {
		page.Prev = link(page.Page - 1)
	}
	if page.Page < page.Pages {
		page.Next = link(page.Page + 1)
	}
}

// sortKeys orders keys in place for the list; ties stay newest first.
func sortKeys(keys []store.Key, by string, totals map[string]store.KeyTotal) {
	newest := func(a, b store.Key) int { return b.CreatedAt.Compare(a.CreatedAt) }
	order := map[string]func(a, b store.Key) int{
		"oldest": func(a, b store.Key) int { return a.CreatedAt.Compare(b.CreatedAt) },
		"description": func(a, b store.Key) int {
			return strings.Compare(strings.ToLower(a.Description), strings.ToLower(b.Description))
		},
		"last_used": func(a, b store.Key) int {
			var ta, tb time.Time
			if a.LastUsedAt != nil {
				ta = *a.LastUsedAt
			}
			if b.LastUsedAt != nil {
				tb = *b.LastUsedAt
			}
			return tb.Compare(ta)
		},
		"spend":    func(a, b store.Key) int { return cmp.Compare(totals[b.ID].Cost, totals[a.ID].Cost) },
		"requests": func(a, b store.Key) int { return cmp.Compare(totals[b.ID].Requests, totals[a.ID].Requests) },
	}[by]
	slices.SortStableFunc(keys, func(a, b store.Key) int {
		if order != nil {
			if c := order(a, b); c != 0 {
				return c
			}
		}
		return newest(a, b)
	})
}

func keyView(k store.Key, now time.Time) keyRow {
	return keyRow{
		ID:           k.ID,
		Description:  k.Description,
		Hint:         k.Hint,
		Status:       statusLabel(k, now),
		Enabled:      k.Enabled,
		RateLimit:    rateLimitLabel(k.RateLimitRPM),
		IPs:          ipsLabel(k.IPRestrictions),
		Models:       modelsLabel(k.Models),
		ExpiresAt:    expiryLabel(k.ExpiresAt),
		CreatedAt:    k.CreatedAt.UTC().Format(timeLayout),
		CreatedDate:  k.CreatedAt.UTC().Format(dateLayout),
		CreatedAtISO: k.CreatedAt.UTC().Format(time.RFC3339),
		LastUsed:     timeLabel(k.LastUsedAt),
		LastUsedAt:   timeShown(k.LastUsedAt, func(t time.Time) string { return relativeTime(t, now) }),
	}
}
