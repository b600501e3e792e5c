package extproc

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	extprocv3 "github.com/envoyproxy/go-control-plane/envoy/service/ext_proc/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// fakeBudgets hands out holds, or refuses with its exceeded budgets after
// taking the holds in taken.
type fakeBudgets struct {
	mu       sync.Mutex
	taken    []store.BudgetLease
	exceeded []budget.Spent
	done     [][]store.BudgetLease
	canceled [][]store.BudgetLease
}

func (b *fakeBudgets) Hold(context.Context, string, string, money.Nanos) ([]store.BudgetLease, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.exceeded) > 0 {
		return b.taken, &budget.Exceeded{Budgets: b.exceeded}
	}
	return b.taken, nil
}

func (b *fakeBudgets) Done(holds []store.BudgetLease, _ money.Nanos) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = append(b.done, holds)
}

func (b *fakeBudgets) Cancel(holds []store.BudgetLease, _ money.Nanos) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.canceled = append(b.canceled, holds)
}

func (*fakeBudgets) Overdrawn([]store.BudgetLease) {}

var testHolds = []store.BudgetLease{{Pot: "bgt_a/1748736000/1748822400", Lease: "lse_a"}, {Pot: "bgt_b/0/0", Lease: "lse_b"}}

// TestASpentBudgetRefusesWith429AndTheReset: the refusal names the budget
// and its reset, Retry-After counts the seconds to it, the holds taken
// under the other budgets and the balance are given back (no record will
// settle them), and the refusal is counted for the key, with the model
// asked for, and in the metric by scope and period.
func TestASpentBudgetRefusesWith429AndTheReset(t *testing.T) {
	resets := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
	fb := &fakeBudgets{taken: testHolds[1:], exceeded: []budget.Spent{{
		Budget: store.Budget{ID: "bgt_a", KeyID: testKey, Period: "day", Amount: 5 * money.PerDollar}, ResetsAt: resets}}}
	g, resp, refused := refusedByBudgets(t, fb)
	status, e := errorOf(t, resp)
	assert.Equal(t, 429, status)
	assert.Equal(t, "budget_exceeded", e.Code)
	assert.Equal(t, "insufficient_quota", e.Type)
	assert.Equal(t, "Key budget of $5.00 per day is spent; it resets at 2025-06-02T00:00:00Z.", e.Message)
	assert.Equal(t, "43200", immediateHeader(resp, "retry-after"), "12 hours to midnight")
	assert.Equal(t, []string{"key/day"}, refused)
	assert.Empty(t, g.usage.all(), "a refusal before admission is counted, not recorded")
	counted := g.refused.all()
	require.Len(t, counted, 1)
	assert.Equal(t, 429, counted[0].Status)
	assert.Equal(t, "budget_exceeded", counted[0].Code)
	assert.Equal(t, [][]store.BudgetLease{testHolds[1:]}, fb.canceled, "the holds the other budgets took are given back")
	assert.Equal(t, g.balance.holds, g.balance.canceled, "and the balance's")
	assert.Empty(t, fb.done, "and not ended as if a record would settle them")
	assert.Empty(t, g.balance.done)
}

// TestABudgetHeldByRequestsInFlightRefusesForASecondNotUntilItsReset: a
// budget that could cover the request once the holds in flight end is not
// spent: the refusal says so, as a rate limit with a Retry-After of one
// second, and counts in the refusals but not as a spent budget; a budget
// spent among the refusing ones still names it, with its reset.
func TestABudgetHeldByRequestsInFlightRefusesForASecondNotUntilItsReset(t *testing.T) {
	resets := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
	held := budget.Spent{Budget: store.Budget{ID: "bgt_m", Period: "month", Amount: money.PerDollar / 100},
		ResetsAt: resets.AddDate(0, 0, 29), Left: money.PerDollar / 200, Held: true}
	spent := budget.Spent{Budget: store.Budget{ID: "bgt_a", KeyID: testKey, Period: "day", Amount: 5 * money.PerDollar}, ResetsAt: resets}
	for _, tc := range []struct {
		name                  string
		exceeded              []budget.Spent
		status                int
		code, typ, msg, retry string
		countedAsSpent        []string
	}{
		{"held only", []budget.Spent{held}, 429, "budget_held", "rate_limit_error",
			"Account budget of $0.01 per month is not spent, but requests in flight hold what is left of it; retry in a second.", "1", nil},
		{"held and spent", []budget.Spent{spent, held}, 429, "budget_exceeded", "insufficient_quota",
			"Key budget of $5.00 per day is spent; it resets at 2025-06-02T00:00:00Z.", "43200", []string{"key/day"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, resp, refused := refusedByBudgets(t, &fakeBudgets{exceeded: tc.exceeded})
			status, e := errorOf(t, resp)
			assert.Equal(t, tc.status, status)
			assert.Equal(t, tc.code, e.Code)
			assert.Equal(t, tc.typ, e.Type)
			assert.Equal(t, tc.msg, e.Message)
			assert.Equal(t, tc.retry, immediateHeader(resp, "retry-after"))
			assert.Equal(t, tc.countedAsSpent, refused)
			counted := g.refused.all()
			require.Len(t, counted, 1)
			assert.Equal(t, tc.code, counted[0].Code)
			assert.Equal(t, g.balance.holds, g.balance.canceled, "the balance's hold is given back")
		})
	}
}

// refusedByBudgets sends a chat request through a router step whose
// budgets are fb, and returns the rig, the answer, and the budgets the
// refusal metric counted (scope/period).
func refusedByBudgets(t *testing.T, fb *fakeBudgets) (*rig, *extprocv3.ProcessingResponse, []string) {
	t.Helper()
	var refused []string
	g := newRig(t, func(g *rig) {
		g.opt.Budgets = fb
		g.opt.BudgetRefused = func(scope, period string) { refused = append(refused, scope+"/"+period) }
	})
	x := g.open(contract.StepRouter)
	g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
	resp := g.send(x, requestBody(chatBody))
	finish(x)
	return g, resp, refused
}

// TestATotalBudgetRefusesWithoutRetryAfter: a total budget never resets.
func TestATotalBudgetRefusesWithoutRetryAfter(t *testing.T) {
	fb := &fakeBudgets{exceeded: []budget.Spent{{Budget: store.Budget{ID: "bgt_b", Period: "total", Amount: money.PerDollar}}}}
	g := newRig(t, func(g *rig) { g.opt.Budgets = fb })
	x := g.open(contract.StepRouter)
	g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
	resp := g.send(x, requestBody(chatBody))
	status, e := errorOf(t, resp)
	finish(x)
	assert.Equal(t, 429, status)
	assert.Contains(t, e.Message, "Account budget of $1.00 in total is spent")
	assert.Empty(t, immediateHeader(resp, "retry-after"))
}

// TestTheBudgetHoldsReachTheUpstreamStepsRecord: the holds travel in the
// signed request metadata, and the upstream step's record carries them.
func TestTheBudgetHoldsReachTheUpstreamStepsRecord(t *testing.T) {
	g := newRig(t, func(g *rig) { g.opt.Budgets = &fakeBudgets{taken: testHolds} })
	_, resp := g.admitted(contract.PathChatCompletions, chatBody)
	meta := resp.GetDynamicMetadata().GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()
	assert.Equal(t, "bgt_a/1748736000/1748822400#lse_a,bgt_b/0/0#lse_b", meta[contract.MetaBudgets].GetStringValue())
	assert.Equal(t, testHolds, parseBudgetLeases(meta[contract.MetaBudgets].GetStringValue()))
	assert.Empty(t, parseBudgetLeases(""))
	assert.Equal(t, []store.BudgetLease{{Pot: "p", Lease: "l"}}, parseBudgetLeases("p#l,broken,#x"))
}

// TestABalanceRefusalWinsOverABudgets: the balance is asked first.
func TestABalanceRefusalWinsOverABudgets(t *testing.T) {
	fb := &fakeBudgets{exceeded: []budget.Spent{{Budget: store.Budget{ID: "bgt_b", Period: "total", Amount: 1}}}}
	g := newRig(t, func(g *rig) { g.opt.Budgets = fb; g.balance.err = store.ErrInsufficientBalance })
	x := g.open(contract.StepRouter)
	g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
	status, e := errorOf(t, g.send(x, requestBody(chatBody)))
	finish(x)
	assert.Equal(t, 402, status)
	assert.Equal(t, "insufficient_balance", e.Code)
}

// immediateHeader is a header an immediate answer sets.
func immediateHeader(resp *extprocv3.ProcessingResponse, name string) string {
	for _, h := range resp.GetImmediateResponse().GetHeaders().GetSetHeaders() {
		if strings.EqualFold(h.GetHeader().GetKey(), name) {
			if raw := h.GetHeader().GetRawValue(); len(raw) > 0 {
				return string(raw)
			}
			return h.GetHeader().GetValue()
		}
	}
	return ""
}

// stalledBudgets never answers a hold: a database that hangs. It notes
// the deadline its context carried.
type stalledBudgets struct {
	fakeBudgets
	deadline time.Time
	bounded  bool
}

func (b *stalledBudgets) Hold(ctx context.Context, _, _ string, _ money.Nanos) ([]store.BudgetLease, error) {
	b.deadline, b.bounded = ctx.Deadline()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestAStalledBudgetHoldAnswersARetryableRefusalBeforeTheProxysTimeout: a
// step whose database does not answer gives up at its deadline, inside
// Envoy's message timeout, with a 503 the client retries after a second,
// and gives back the balance it held; nothing is recorded.
func TestAStalledBudgetHoldAnswersARetryableRefusalBeforeTheProxysTimeout(t *testing.T) {
	sb := &stalledBudgets{}
	g := newRig(t, func(g *rig) { g.opt.Budgets = sb })
	x := g.open(contract.StepRouter)
	g.send(x, requestHeaders(contract.PathChatCompletions, "POST", false))
	sent := time.Now()
	resp := g.send(x, requestBody(chatBody))
	finish(x)
	require.True(t, sb.bounded, "the hold's context has a deadline")
	assert.WithinDuration(t, sent.Add(contract.StepDeadline), sb.deadline, contract.StepDeadline/2)
	assert.Less(t, contract.StepDeadline, contract.MessageTimeout)
	status, e := errorOf(t, resp)
	assert.Equal(t, 503, status)
	assert.Equal(t, "no_available_workers", e.Code)
	assert.Equal(t, "service_unavailable", e.Type)
	assert.Contains(t, e.Message, "Tollgate could not check this request in time; please retry.")
	assert.Equal(t, "1", immediateHeader(resp, "retry-after"))
	assert.Equal(t, g.balance.holds, g.balance.canceled, "the balance's hold is given back")
	assert.Empty(t, g.usage.all())
}

// TestASpentTeamBudgetRefusesNamingTheTeam: a team's budget refuses with
// the same 429 and code as a key's, its message naming the team's budget,
// and is counted in the metric under scope team.
func TestASpentTeamBudgetRefusesNamingTheTeam(t *testing.T) {
	resets := time.Date(2025, 6, 2, 0, 0, 0, 0, time.UTC)
	fb := &fakeBudgets{exceeded: []budget.Spent{{
		Budget: store.Budget{ID: "bgt_t", TeamID: "team_1", TeamName: "research", Period: "day", Amount: 5 * money.PerDollar}, ResetsAt: resets}}}
	_, resp, refused := refusedByBudgets(t, fb)
	status, e := errorOf(t, resp)
	assert.Equal(t, 429, status)
	assert.Equal(t, "budget_exceeded", e.Code)
	assert.Equal(t, `Team "research" budget of $5.00 per day is spent; it resets at 2025-06-02T00:00:00Z.`, e.Message)
	assert.Equal(t, []string{"team/day"}, refused)
}
