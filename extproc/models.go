package extproc

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

type accessResult int

const (
	accessOK accessResult = iota
	accessDenied
	accessUnavailable
)

// access decides whether a key may use a model right now: the model must be
// in the account plan, in the key's allow-list and in its team's (else
// denied, 403), and at
// least one of its deployments must be available (else 503). GET /v1/models
// lists exactly the models for which this says OK.
func access(cfg *config.Config, health Health, key store.Key, acct store.Account, m *config.Model) accessResult {
	plan, ok := cfg.Plan(acct.Plan)
	if !ok || !plan.AllowsModel(m.ID) {
		return accessDenied
	}
	if key.Models != nil && !slices.Contains(key.Models, m.ID) {
		return accessDenied
	}
	if key.TeamID != "" && key.TeamModels != nil && !slices.Contains(key.TeamModels, m.ID) {
		return accessDenied // the team's list bounds its keys', even a key's "all"
	}
	var available func(string) bool
	if health != nil {
		available = health.Available
	}
	if cfg.ModelAvailable(m, available) {
		return accessOK
	}
	return accessUnavailable
}

// modelList is OpenAI's list shape for GET /v1/models.
type modelList struct {
	Object string       `json:"object"`
	Data   []modelEntry `json:"data"`
}

type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// Kind is what the model serves (chat, completion, embedding,
	// moderation, rerank): Tollgate's own field, beside OpenAI's.
	Kind string `json:"kind"`
}

// models answers GET /v1/models at once with the models this key may use now.
func (r *routerStep) models(ctx context.Context) (*extprocv3.ProcessingResponse, error) {
	key, acct, err := r.identity(ctx)
	if err != nil {
		return immediate(r.failed(err).ForRequest(r.clientRequestID), r.refusal), nil
	}
	list := modelList{Object: "list", Data: []modelEntry{}}
	for i := range r.cfg.Models {
		m := &r.cfg.Models[i]
		if access(r.cfg, r.s.opt.Health, key, acct, m) == accessOK {
			list.Data = append(list.Data, r.entry(m))
		}
	}
	if r.anthropicVersion != "" {
		return jsonReply(anthropicModels(list.Data))
	}
	return jsonReply(list)
}

// anthropicModelList is Anthropic's list shape for GET /v1/models, which
// its SDKs (and Claude Code) read: a client that sends anthropic-version
// gets it. Every model the key may use is on the one page.
type anthropicModelList struct {
	Data    []anthropicModel `json:"data"`
	HasMore bool             `json:"has_more"`
	FirstID *string          `json:"first_id"`
	LastID  *string          `json:"last_id"`
}

type anthropicModel struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

func anthropicModels(entries []modelEntry) anthropicModelList {
	out := anthropicModelList{Data: make([]anthropicModel, 0, len(entries))}
	for _, e := range entries {
		out.Data = append(out.Data, anthropicModel{Type: "model", ID: e.ID, DisplayName: e.ID,
			CreatedAt: time.Unix(e.Created, 0).UTC().Format(time.RFC3339)})
	}
	if n := len(out.Data); n > 0 {
		out.FirstID, out.LastID = &out.Data[0].ID, &out.Data[n-1].ID
	}
	return out
}

func (r *routerStep) entry(m *config.Model) modelEntry {
	return modelEntry{ID: m.ID, Object: "model", Created: r.cfg.CreatedAt(m).Unix(), OwnedBy: "tollgate", Kind: m.Kind}
}

// oneModel answers GET /v1/models/{id}: the model's entry when the key may use
// it now (exactly the models the list shows), else 404 model_not_found.
func (r *routerStep) oneModel(ctx context.Context, escaped string) (*extprocv3.ProcessingResponse, error) {
	key, acct, err := r.identity(ctx)
	if err != nil {
		return immediate(r.failed(err).ForRequest(r.clientRequestID), r.refusal), nil
	}
	id, err := url.PathUnescape(escaped)
	m, ok := r.cfg.Model(id)
	if err != nil || !ok || access(r.cfg, r.s.opt.Health, key, acct, m) != accessOK {
		e := oaierror.ModelNotFound.With("The model \""+truncate(id)+"\" does not exist or you do not have access to it.", "model")
		return immediate(e, nil), nil
	}
	return jsonReply(r.entry(m))
}

// jsonReply answers at once with 200 and v as JSON.
func jsonReply(v any) (*extprocv3.ProcessingResponse, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return immediate(oaierror.Internal, nil), nil
	}
	return &extprocv3.ProcessingResponse{Response: &extprocv3.ProcessingResponse_ImmediateResponse{
		ImmediateResponse: &extprocv3.ImmediateResponse{
			Status:  &typev3.HttpStatus{Code: typev3.StatusCode_OK},
			Headers: &extprocv3.HeaderMutation{SetHeaders: contract.SetRawHeaders("content-type", "application/json")},
			Body:    body,
		},
	}}, nil
}
