package restapi

import (
	"net/http"
	"time"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
)

type balanceBucketJSON struct {
	Start       time.Time   `json:"start"`
	CreditedUSD money.Nanos `json:"credited_usd"`
	SpentUSD    money.Nanos `json:"spent_usd"`
	BalanceUSD  money.Nanos `json:"balance_usd"`
}

type balanceChangeJSON struct {
	ID         string      `json:"id"`
	Kind       string      `json:"kind"`
	AmountUSD  money.Nanos `json:"amount_usd"`
	BalanceUSD money.Nanos `json:"balance_usd"`
	CreatedAt  time.Time   `json:"created_at"`
}

type balanceHistoryJSON struct {
	Object       string              `json:"object"`
	AccountID    string              `json:"account_id"`
	BalanceUSD   money.Nanos         `json:"balance_usd"`
	ReservedUSD  money.Nanos         `json:"reserved_usd"`
	AvailableUSD money.Nanos         `json:"available_usd"`
	From         time.Time           `json:"from"`
	To           time.Time           `json:"to"`
	Group        string              `json:"group"`
	Buckets      []balanceBucketJSON `json:"buckets"`
	Changes      []balanceChangeJSON `json:"changes"`
}

func (api *API) balanceHistory(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	q := r.URL.Query()
	req := manage.UsageRequest{AccountID: r.PathValue("id"), Group: q.Get("group")}
	var err error
	if req.From, req.To, err = rangeOf(q); err != nil {
		return err
	}
	h, err := api.svc.BalanceHistoryOf(r.Context(), a, req)
	if err != nil {
		return err
	}
	out := balanceHistoryJSON{Object: "balance_history", AccountID: h.Account.ID, BalanceUSD: h.Account.Balance,
		ReservedUSD: h.Account.Reserved, AvailableUSD: h.Account.Balance - h.Account.Reserved,
		From: h.From, To: h.To, Group: h.Group, Buckets: []balanceBucketJSON{}, Changes: []balanceChangeJSON{}}
	for _, b := range h.Buckets {
		out.Buckets = append(out.Buckets, balanceBucketJSON{Start: b.Start, CreditedUSD: b.Credited, SpentUSD: b.Spent, BalanceUSD: b.Closing})
	}
	for _, c := range h.Changes {
		out.Changes = append(out.Changes, balanceChangeJSON{ID: c.ID, Kind: c.Kind, AmountUSD: c.Amount, BalanceUSD: c.Balance, CreatedAt: c.At.UTC()})
	}
	return writeJSON(w, http.StatusOK, out)
}
