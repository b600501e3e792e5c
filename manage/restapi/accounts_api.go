package restapi

import (
	"net/http"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
)

func (api *API) createAccount(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "email", "plan", "balance_usd")
	if err != nil {
		return err
	}
	var email, plan string
	var balance money.Nanos
	for name, v := range map[string]any{"email": &email, "plan": &plan, "balance_usd": &balance} {
		if _, err := field(fields, name, v); err != nil {
			return err
		}
	}
	acct, err := api.svc.CreateAccount(r.Context(), a, email, plan, balance)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/api/v1/accounts/"+acct.ID)
	return writeJSON(w, http.StatusCreated, manage.AccountView(acct))
}

func (api *API) getAccount(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	acct, err := api.svc.GetAccount(r.Context(), a, r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.AccountView(acct))
}

func (api *API) creditAccount(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "amount_usd")
	if err != nil {
		return err
	}
	var amount money.Nanos
	if _, err := field(fields, "amount_usd", &amount); err != nil {
		return err
	}
	acct, err := api.svc.CreditAccount(r.Context(), a, r.PathValue("id"), amount)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.AccountView(acct))
}

func (api *API) patchAccount(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	fields, err := readBody(r, "plan", "low_balance_threshold_usd")
	if err != nil {
		return err
	}
	var plan string
	hasPlan, err := field(fields, "plan", &plan)
	if err != nil {
		return err
	}
	hasLow, low, err := lowBalanceField(fields)
	if err != nil {
		return err
	}
	if !hasPlan && !hasLow {
		return oaierror.Invalid("invalid_request", "plan", "Give the plan to change to, or low_balance_threshold_usd.")
	}
	c := manage.AccountChange{SetLowBalance: hasLow, LowBalance: low}
	if hasPlan {
		c.Plan = &plan
	}
	acct, err := api.svc.UpdateAccount(r.Context(), a, r.PathValue("id"), c)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, manage.AccountView(acct))
}

// modelJSON is a model an account may use, on the wire.
type modelJSON struct {
	ID        string `json:"id"`
	Object    string `json:"object"`
	Kind      string `json:"kind"`
	MaxTokens int    `json:"max_tokens"`
	// Available says whether a provider can serve it now (the key check's
	// and GET /v1/models' answer).
	Available bool `json:"available"`
	Pricing   struct {
		InputPerMillion       money.Nanos `json:"input_usd_per_million"`
		OutputPerMillion      money.Nanos `json:"output_usd_per_million"`
		CachedInputPerMillion money.Nanos `json:"cached_input_usd_per_million"`
		CacheWritePerMillion  money.Nanos `json:"cache_write_usd_per_million"`
		SearchUnit            money.Nanos `json:"search_unit_usd,omitempty"`
	} `json:"pricing"`
}

// listModels lists the models the account's plan allows, with prices and
// whether each can be served now.
func (api *API) listModels(w http.ResponseWriter, r *http.Request, a manage.Actor) error {
	id, err := accountOf(a, r.URL.Query().Get("account_id"))
	if err != nil {
		return err
	}
	planModels, err := api.svc.PlanModels(r.Context(), a, id)
	if err != nil {
		return err
	}
	models := make([]modelJSON, len(planModels))
	for i, m := range planModels {
		v := modelJSON{ID: m.ID, Object: "model", Kind: m.Kind, MaxTokens: m.MaxTokens, Available: m.Available}
		v.Pricing.SearchUnit = m.SearchUnitPrice
		v.Pricing.InputPerMillion, v.Pricing.OutputPerMillion = m.InputPricePerMillion, m.OutputPricePerMillion
		v.Pricing.CachedInputPerMillion, v.Pricing.CacheWritePerMillion = m.CachedInputPricePerMillion, m.CacheWritePricePerMillion
		models[i] = v
	}
	return writeJSON(w, http.StatusOK, list(models, ""))
}
