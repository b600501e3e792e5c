package dashboard

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/store"
)

// requestDetailPage is one usage record of a key, every field of it.
type requestDetailPage struct {
	Key                                                           keyRow
	ID, When, Model, Endpoint, Provider, Deployment, Status, Code string
	Message                                                       string
	PromptTokens, CompletionTokens, CachedTokens, ReasoningTokens string
	Cost, Latency, TTFT, Attempts, RequestID                      string
	Estimated, Failed                                             bool
	// Log links back to the request log with this request's id.
	Log string
}

// keyRequest shows /keys/{id}/requests/{record}: the record of that id.
func (d *Dashboard) keyRequest(w http.ResponseWriter, r *http.Request, s *session) error {
	k, err := d.ownKey(r, s)
	if err != nil {
		return err
	}
	id := r.PathValue("record")
	if id == "" {
		return errNotFound
	}
	recs, err := d.manage.Records(r.Context(), d.actor(r, s), manage.UsageRequest{KeyID: k.ID, AllTime: true, RecordID: id}, nil, 1)
	if err != nil {
		return fmt.Errorf("request detail: %w", err)
	}
	if len(recs) == 0 {
		return errNotFound
	}
	page := requestDetailOf(recs[0])
	page.Key = keyView(k, d.now())
	if page.RequestID != "" {
		page.Log = "/keys/" + k.ID + "/requests?" + requestFilters{RequestID: page.RequestID}.values().Encode()
	}
	d.render(w, r, http.StatusOK, "key_request", s, "Request "+page.ID, page)
	return nil
}

func requestDetailOf(u store.UsageRecord) requestDetailPage {
	row := requestRowOf(u)
	return requestDetailPage{ID: u.ID, When: row.When, Model: row.Model, Endpoint: u.Endpoint, Provider: u.Provider, Deployment: u.Deployment,
		Status: row.Status, Code: u.ErrorCode, Message: u.ErrorMessage,
		PromptTokens: count(u.PromptTokens), CompletionTokens: count(u.CompletionTokens),
		CachedTokens: count(u.CachedTokens), ReasoningTokens: count(u.ReasoningTokens),
		Cost: row.Cost, Latency: row.Latency, TTFT: row.TTFT, Attempts: strconv.Itoa(u.Attempts), RequestID: u.RequestID,
		Estimated: u.Estimated, Failed: row.Failed}
}
