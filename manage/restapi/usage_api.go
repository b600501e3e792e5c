package restapi

import (
	"net/http"
	"net/url"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// usageRequestOf reads a usage call's query: key_id or account_id, from
// and to (RFC 3339, or a date: its start, UTC), group, endpoint.
func usageRequestOf(r *http.Request, a manage.Actor) (manage.UsageRequest, error) {
	q := r.URL.Query()
	req := manage.UsageRequest{AccountID: q.Get("account_id"), KeyID: q.Get("key_id"), Group: q.Get("group"),
		Endpoint: q.Get("endpoint")}
	if req.KeyID == "" {
		account, err := accountOf(a, req.AccountID)
		if err != nil {
			return manage.UsageRequest{}, oaierror.Invalid("invalid_request", "account_id", "An admin token must say whose usage: key_id or account_id.")
		}
		req.AccountID = account
	}
	var err error
	req.From, req.To, err = rangeOf(q)
	return req, err
}

// rangeOf reads from and to (RFC 3339, or a date: its start, UTC).
func rangeOf(q url.Values) (from, to time.Time, err error) {
	if from, err = manage.ParseInstant("from", q.Get("from")); err != nil {
		return time.Time{}, time.Time{}, err
	}
	if to, err = manage.ParseInstant("to", q.Get("to")); err != nil {
		return time.Time{}, time.Time{}, err
	}
	return from, to, nil
}

// ParseInstant reads the bound of a usage range named name: an RFC 3339

func (api *API) usage(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	req, err := usageRequestOf(r, a)
	if err != nil {
		return err
	}
	rep, err := api.svc.Usage(r.Context(), a, req)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.UsageView(rep))
}

func (api *API) usageRecords(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	req, err := usageRequestOf(r, a)
	if err != nil {
		return err
	}
	switch r.URL.Query().Get("format") {
	case "csv":
		return api.svc.UsageCSV(w, r, a, req)
	case "", "json":
	default:
		return oaierror.Invalid("invalid_request", "format", "format must be json or csv.")
	}
	limit, err := limitOf(r)
	if err != nil {
		return err
	}
	recs, next, err := api.svc.UsageRecords(r.Context(), a, req, r.URL.Query().Get("after"), limit)
	if err != nil {
		return err
	}
	views := make([]manage.RecordJSON, len(recs))
	for i, u := range recs {
		views[i] = manage.RecordView(u)
	}
	return writeJSON(w, http.StatusOK, list(views, next))
}
