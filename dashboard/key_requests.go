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
// page, filtered by model and outcome (as OpenRouter's Activity).

const requestsPerPage = 50

type requestRow struct {
	When, Model, Status, Code, Tokens, Cost, Latency, TTFT, RequestID string
	Failed                                                            bool
	Attempts                                                          int
}

type requestLogPage struct {
	Key      keyRow
	Rows     []requestRow
	Model    string
	Outcome  string
	Models   []string
	Older    string
	Filtered bool
}

// keyRequests shows the request log; ?model=, ?outcome=ok|error and
// ?before= (the previous page's last record) select the page.
func (d *Dashboard) keyRequests(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	query := r.URL.Query()
	page := requestLogPage{Key: keyView(k, d.now()), Model: strings.TrimSpace(query.Get("model")), Outcome: query.Get("outcome")}
	if page.Outcome != store.OutcomeOK && page.Outcome != store.OutcomeError {
		page.Outcome = ""
	}
	page.Filtered = page.Model != "" || page.Outcome != ""
	if cfg := d.config(); cfg != nil {
		for _, m := range cfg.Models {
			page.Models = append(page.Models, m.ID)
		}
	}
	q := manage.UsageRequest{KeyID: k.ID, AllTime: true, Model: page.Model, Outcome: page.Outcome}
	var before *store.UsageRecord
	if b := query.Get("before"); b != "" {
		us, id, ok := strings.Cut(b, "_")
		micros, err := strconv.ParseInt(us, 10, 64)
		if !ok || err != nil || id == "" {
			return errNotFound // not a cursor this page gave
		}
		before = &store.UsageRecord{ID: id, CreatedAt: time.UnixMicro(micros).UTC()}
	}
	recs, err := d.manage.Records(r.Context(), d.actor(r, s), q, before, requestsPerPage+1)
	if err != nil {
		return fmt.Errorf("request log: %w", err)
	}
	if len(recs) > requestsPerPage {
		recs = recs[:requestsPerPage]
		last := recs[len(recs)-1]
		v := url.Values{"before": {strconv.FormatInt(last.CreatedAt.UnixMicro(), 10) + "_" + last.ID}}
		if page.Model != "" {
			v.Set("model", page.Model)
		}
		if page.Outcome != "" {
			v.Set("outcome", page.Outcome)
		}
		page.Older = "/keys/" + k.ID + "/requests?" + v.Encode()
	}
	for _, u := range recs {
		row := requestRow{When: u.CreatedAt.UTC().Format("2006-01-02 15:04:05 UTC"), Model: u.Model, Status: strconv.Itoa(u.Status),
			Code: u.ErrorCode, Tokens: tokensLabel(u), Cost: usd(u.Cost),
			Latency: msLabel(u.Latency), RequestID: u.RequestID, Failed: u.Status >= 400, Attempts: u.Attempts}
		if u.TTFT > 0 {
			row.TTFT = msLabel(u.TTFT)
		}
		if row.Model == "" {
			row.Model = "—" // refused before a model was known
		}
		page.Rows = append(page.Rows, row)
	}
	d.render(w, r, http.StatusOK, "key_requests", s, "Requests of "+k.Description, page)
	return nil
}
