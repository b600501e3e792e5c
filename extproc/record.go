package extproc

import (
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/extproc/provider"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// This file makes a request's one usage record, for both steps. Each step
// knows the request's admission (the router step made it; the upstream
// step reads it from the signed request metadata) and how the request
// ended there (an outcome); record turns the two into the record, prices
// it, and writes it once per step. The record's id derives from the
// request id the router step drew, so that a request both steps record is
// stored once (records are idempotent by id).

// admission is what both steps know of an admitted request.
type admission struct {
	keyID, accountID string
	clientRequestID  string // the x-request-id header
	requestID        string // drawn at admission; names the hold and the usage record
	model            *config.Model
	endpointName     string // the endpoint's name (store.Endpoint*), for the record
	stream           bool
	started          time.Time
	leaseID          string              // the lease the hold came from; "" for a reservation of its own
	held             money.Nanos         // money held for this request
	balanceHeld      bool                // held is held from the balance too
	budgetLeases     []store.BudgetLease // its holds under spend budgets, each of held
	tokensHeld       int64               // tokens reserved against the key's token limits (tokens.go)
	recorded         bool                // this step wrote the request's record
}

// outcome is how a request ended in one step.
type outcome struct {
	status    int
	code      string
	usage     provider.Usage
	estimated bool
	// target is the deployment that answered (the upstream step's); nil
	// when none did.
	target   *provider.Target
	attempts int
	ttft     time.Duration
	// message is what the client was told of a failure Tollgate made
	// ("" for a success, and for a provider's error the upstream step
	// translated: the router step sees only its status).
	message string
}

// record writes the request's usage record, priced at the model's prices,
// naming its hold (which writing it releases); once per step: it reports
// false, writing nothing, when the step recorded the request already.
func (s *Server) record(step string, a *admission, o outcome) (store.UsageRecord, bool) {
	if a.recorded {
		return store.UsageRecord{}, false
	}
	a.recorded = true
	now := s.opt.Now()
	u := o.usage
	rec := store.UsageRecord{
		KeyID: a.keyID, AccountID: a.accountID, RequestID: a.clientRequestID,
		Status: o.status, ErrorCode: o.code, Estimated: o.estimated,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		CachedTokens: u.CachedTokens, CacheWriteTokens: u.CacheWriteTokens, ReasoningTokens: u.ReasoningTokens,
		Latency: now.Sub(a.started), CreatedAt: now.UTC(),
		Attempts: o.attempts, Streamed: a.stream, ErrorMessage: o.message, Endpoint: a.endpointName,
	}
	if a.stream {
		// Time to first token means something for a stream only: an
		// answer sent whole has its first byte with its last.
		rec.TTFT = o.ttft
	}
	if m := a.model; m != nil {
		rec.Model = m.ID
		rec.Cost = m.Cost(config.Tokens{Prompt: u.PromptTokens, CachedPrompt: u.CachedTokens,
			CacheWrite: u.CacheWriteTokens, Completion: u.CompletionTokens, SearchUnits: u.SearchUnits})
	}
	if t := o.target; t != nil {
		rec.Provider, rec.Deployment = t.Provider.Name, t.Deployment.ID
	}
	if a.requestID != "" {
		rec.ID = usageID(a.requestID)
		if a.held > 0 {
			setHold(&rec, a.requestID, a.leaseID, a.held)
			rec.BudgetLeases = a.budgetLeases
		}
	}
	s.overcharged(rec, a.held)
	s.settleTokens(a, rec)
	if err := s.opt.Usage.Record(rec); err != nil {
		s.opt.Logger.Error(step+" step: usage record refused", "err", err)
	}
	return rec, true
}

// setHold names the request's hold on its record: its amount, and the
// lease it came from or (none) the reservation of its own, if any.
func setHold(rec *store.UsageRecord, requestID, leaseID string, held money.Nanos) {
	rec.Held = held
	if leaseID != "" {
		rec.LeaseID = leaseID
		return
	}
	rec.ReservationID = reservationID(requestID)
}

// estimateUsage completes the usage of an answer whose provider reported
// no final counts (the client left, or the provider broke off), billing
// what the provider will charge: what it did report is kept (Anthropic
// counts the prompt at a stream's start); the prompt is estimated with
// images and files at what their hold counted; the completion is what was
// seen, or, for a reasoning model, its whole held output, since its hidden
// reasoning tokens cannot be seen (neither edge reads on after the client
// leaves: docs/decisions.md). The prompt is read from the adapter's parse
// of the body when it made one (provider.Request).
func estimateUsage(usage provider.Usage, req *provider.Request, completion string, m *config.Model) provider.Usage {
	if usage.PromptTokens == 0 {
		usage.PromptTokens = provider.EstimatePromptTokens(req, m)
	}
	usage.CompletionTokens = max(usage.CompletionTokens, provider.EstimateTokens(completion))
	if m.Reasoning {
		usage.CompletionTokens = max(usage.CompletionTokens, provider.HeldOutput(req.Body, m))
	}
	return usage
}

// usageMetadata is the dynamic metadata the access log reads
// (contract.DynamicMetadataNamespace): the record's key, endpoint, model,
// provider, tokens, cost and whether they are estimated. Every value and
// struct lives in one usageValues, so building it takes a handful of
// allocations (it, its two maps, the cost's text), not two per field.
func usageMetadata(rec store.UsageRecord) *structpb.Struct {
	v := new(usageValues)
	v.strs[0].StringValue, v.strs[1].StringValue = rec.KeyID, rec.Endpoint
	v.strs[2].StringValue, v.strs[3].StringValue, v.strs[4].StringValue = rec.Model, rec.Provider, rec.Cost.String()
	for i := range v.strs {
		v.vals[i].Kind = &v.strs[i]
	}
	v.nums[0].NumberValue, v.nums[1].NumberValue = float64(rec.PromptTokens), float64(rec.CompletionTokens)
	v.vals[5].Kind, v.vals[6].Kind = &v.nums[0], &v.nums[1]
	v.flag.BoolValue = rec.Estimated
	v.vals[7].Kind = &v.flag
	v.inner.Fields = map[string]*structpb.Value{
		"key_id": &v.vals[0], "endpoint": &v.vals[1], "model": &v.vals[2], "provider": &v.vals[3], "cost_usd": &v.vals[4],
		"prompt_tokens": &v.vals[5], "completion_tokens": &v.vals[6], "estimated": &v.vals[7],
	}
	v.nsKind.StructValue = &v.inner
	v.nsValue.Kind = &v.nsKind
	v.outer.Fields = map[string]*structpb.Value{contract.DynamicMetadataNamespace: &v.nsValue}
	return &v.outer
}

// usageValues holds usageMetadata's values and structs: the strings
// key_id, endpoint, model, provider and cost_usd, the two token counts,
// and estimated, in that order in vals.
type usageValues struct {
	strs         [5]structpb.Value_StringValue
	nums         [2]structpb.Value_NumberValue
	flag         structpb.Value_BoolValue
	vals         [8]structpb.Value
	inner, outer structpb.Struct
	nsValue      structpb.Value
	nsKind       structpb.Value_StructValue
}
