package dashboard

import (
	"net/http"
	"strconv"
)

// modelsPage lists the models the account's plan includes.
type modelsPage struct {
	Plan   string
	Models []modelRow
}

// modelRow is one model as the list shows it.
type modelRow struct {
	ID          string
	Available   bool
	MaxTokens   string
	InputPrice  string // USD per million input tokens
	OutputPrice string // USD per million output tokens
}

// listModels shows the supported models: those of the account's plan, in
// the configuration's order, each with whether a provider can serve it now
// (the same answer GET /v1/models and admission give) and its prices.
func (d *Dashboard) listModels(w http.ResponseWriter, r *http.Request, s *session) error {
	cfg := d.config()
	page := modelsPage{Plan: s.account.Plan, Models: []modelRow{}}
	for _, m := range cfg.PlanModels(s.account.Plan) {
		page.Models = append(page.Models, modelRow{
			ID:          m.ID,
			Available:   cfg.ModelAvailable(m, d.available),
			MaxTokens:   count(int64(m.MaxTokens)),
			InputPrice:  usd(m.InputPricePerMillion),
			OutputPrice: usd(m.OutputPricePerMillion),
		})
	}
	d.render(w, r, http.StatusOK, "models", s, "Models ("+strconv.Itoa(len(page.Models))+")", page)
	return nil
}
