package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// The request log: a key's usage records themselves, newest first, fifty a
// page, and the refusals counted for it (grouped by hour, status, code and
// model asked for: they are not recorded one by one), both filtered by
// days, status class, error code, model, endpoint and request id; a
// record's detail;
// and the records the filters select as CSV.

const (
	requestsPerPage = 50
	// refusalGroups bounds the refusal groups shown under the filters.
	refusalGroups = 100
)

type requestRow struct {
	ID, When, Model, Endpoint, Status, Code, Message, Tokens, Cost, Latency, TTFT, RequestID string
	Failed                                                                                   bool
	Attempts                                                                                 int
}

// refusalRow is one group of refusals: "429 rate_limit_exceeded × 12,
// 14:00–15:00, gpt-4o".
type refusalRow struct {
	Hour, Status, Code, Model, Count, Message string
}

// requestFilters are the request log's filters, as the form sends them.
type requestFilters struct {
	From, To, Status, Code, Model, Endpoint, RequestID string
	// Problem is what is wrong with the days, shown beside them (the log
	// is then not filtered by days).
	Problem string
}

type requestLogPage struct {
	Key      keyRow
	Filters  requestFilters
	Rows     []requestRow
	Refusals []refusalRow
	// MoreRefusals is set when there are more groups than shown.
	MoreRefusals bool
	Models       []string
	Endpoints    []string
	Statuses     []string
	Today        string
	Older        string
	CSV          string
	Filtered     bool
}

// statusClasses are the status filter's choices.
var statusClasses = map[string]int{"2xx": 2, "4xx": 4, "5xx": 5}

// requestFiltersOf reads the filters of a request-log query and the usage
// request they select.
func requestFiltersOf(q url.Values, keyID string, now time.Time) (requestFilters, manage.UsageRequest) {
	f := requestFilters{From: q.Get("from"), To: q.Get("to"), Status: q.Get("status"), Code: strings.TrimSpace(q.Get("code")),
		Model: strings.TrimSpace(q.Get("model")), Endpoint: endpointOf(q), RequestID: strings.TrimSpace(q.Get("request_id"))}
	if _, ok := statusClasses[f.Status]; !ok {
		f.Status = ""
	}
	req := manage.UsageRequest{KeyID: keyID, AllTime: true, Model: f.Model, Endpoint: f.Endpoint, StatusClass: statusClasses[f.Status], Code: f.Code,
		RequestID: f.RequestID}
	if f.From != "" || f.To != "" {
		w, problem := customWindow(f.From, f.To, now)
		if problem != "" {
			f.Problem = problem
			return f, req
		}
		req.AllTime = false
		req.From, req.To = w.bounds(now)
	}
	return f, req
}

// values are the filters as a query (empty ones left out).
func (f requestFilters) values() url.Values {
	v := url.Values{}
	for name, val := range map[string]string{"from": f.From, "to": f.To, "status": f.Status, "code": f.Code, "model": f.Model,
		"endpoint": f.Endpoint, "request_id": f.RequestID} {
		if val != "" {
			v.Set(name, val)
		}
	}
	return v
}

// keyRequests shows the request log; the filters above, and ?before=
// (the previous page's last record) select the page.
func (d *Dashboard) keyRequests(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	query, now := r.URL.Query(), d.now()
	f, q := requestFiltersOf(query, k.ID, now)
	page := requestLogPage{Key: keyView(k, now), Filters: f, Today: now.UTC().Format(dateLayout),
		Statuses: []string{"2xx", "4xx", "5xx"}, Endpoints: store.Endpoints, Filtered: len(f.values()) > 0}
	page.CSV = "/keys/" + k.ID + "/requests.csv?" + f.values().Encode()
	if cfg := d.config(); cfg != nil {
		for _, m := range cfg.Models {
			page.Models = append(page.Models, m.ID)
		}
	}
	before, ok := cursorOf(query.Get("before"))
	if !ok {
		return errNotFound // not a cursor this page gave
	}
	ctx, a := r.Context(), d.actor(r, s)
	recs, err := d.manage.Records(ctx, a, q, before, requestsPerPage+1)
	if err != nil {
		return fmt.Errorf("request log: %w", err)
	}
	if len(recs) > requestsPerPage {
		recs = recs[:requestsPerPage]
		last := recs[len(recs)-1]
		v := f.values()
		v.Set("before", strconv.FormatInt(last.CreatedAt.UnixMicro(), 10)+"_"+last.ID)
		page.Older = "/keys/" + k.ID + "/requests?" + v.Encode()
	}
	for _, u := range recs {
		page.Rows = append(page.Rows, requestRowOf(u))
	}
	if before == nil { // the refusals once, on the first page
		if page.Refusals, page.MoreRefusals, err = d.refusalRows(r, s, q); err != nil {
			return err
		}
	}
	status := http.StatusOK
	if f.Problem != "" {
		status = http.StatusBadRequest
	}
	d.render(w, r, status, "key_requests", s, "Requests of "+k.Description, page)
	return nil
}

// cursorOf reads ?before= ("" is none); false when it is not a cursor
// this page gave.
func cursorOf(b string) (*store.UsageRecord, bool) {
	if b == "" {
		return nil, true
	}
	us, id, ok := strings.Cut(b, "_")
	micros, err := strconv.ParseInt(us, 10, 64)
	if !ok || err != nil || id == "" {
		return nil, false
	}
	return &store.UsageRecord{ID: id, CreatedAt: time.UnixMicro(micros).UTC()}, true
}

func requestRowOf(u store.UsageRecord) requestRow {
	row := requestRow{ID: u.ID, When: u.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"), Model: u.Model, Endpoint: u.Endpoint, Status: strconv.Itoa(u.Status),
		Code: u.ErrorCode, Message: u.ErrorMessage, Tokens: tokensLabel(u), Cost: usd(u.Cost),
		Latency: msLabel(u.Latency), TTFT: "—", RequestID: u.RequestID, Failed: u.Status >= 400, Attempts: u.Attempts}
	if u.TTFT > 0 {
		row.TTFT = msLabel(u.TTFT)
	}
	if row.Model == "" {
		row.Model = noModelRecorded
	}
	return row
}

// refusalRows are the refusal groups q selects, newest hour first.
func (d *Dashboard) refusalRows(r *http.Request, s *session, q manage.UsageRequest) ([]refusalRow, bool, error) {
	groups, err := d.manage.Refusals(r.Context(), d.actor(r, s), q, refusalGroups+1)
	if err != nil {
		return nil, false, fmt.Errorf("refusals: %w", err)
	}
	more := len(groups) > refusalGroups
	if more {
		groups = groups[:refusalGroups]
	}
	hourly := windowNamed("24h")
	out := make([]refusalRow, 0, len(groups))
	for _, g := range groups {
		model := g.Model
		if model == "" {
			model = noModelRefused
		}
		out = append(out, refusalRow{Hour: hourly.bucketLabel(g.Hour), Status: strconv.Itoa(g.Status), Code: g.Code, Model: model,
			Count: count(g.Count), Message: g.Message})
	}
	return out, more, nil
}

// keyRequestsCSV sends the records the request log's filters select as
// CSV, through the management API's export (the same columns).
func (d *Dashboard) keyRequestsCSV(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	f, q := requestFiltersOf(r.URL.Query(), k.ID, d.now())
	if f.Problem != "" {
		return &pageError{status: http.StatusBadRequest, title: "Choose a range of days", message: f.Problem}
	}
	return d.manage.UsageCSV(w, r, d.actor(r, s), q)
}
