package extproc

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/tollgate/tollgate/budget"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// This file holds what a request may cost before it is sent, and gives
// it back. The router step reserves the request's most tokens against the
// key's token limits (reserveTokens), then holds its most possible cost
// from the account's balance lease and under every spend budget of its
// key, its key's team and its account (hold). A refused request gives back what it took
// (giveBack); an admitted one leaves this replica's leases when the step
// ends (done), and its usage record settles the holds in the database and
// the token reservation (settleTokens) wherever it is written.

// reserveTokens reserves the request's most possible tokens against the
// key's token limits, and keeps the headers its answer carries. It
// fails with 429 when a window has no room for them, or when they are
// more than a limit allows at all.
func (r *routerStep) reserveTokens(ctx context.Context, cr validChat) *oaierror.Error {
	if r.s.opt.Tokens == nil {
		return nil
	}
	_, acct, err := r.identity(ctx)
	if err != nil {
		return copyError(r.failed(err))
	}
	lim := tokenLimits(r.cfg, r.key, acct)
	if lim.PerMinute <= 0 && lim.PerDay <= 0 {
		return nil
	}
	n := promptTokensHeld(cr) + cr.MaxTokens*int64(max(cr.Choices, 1))
	res, err := r.s.opt.Tokens.ReserveTokens(ctx, r.keyID, r.requestID, n, lim, r.s.tokenClock())
	if err != nil {
		r.s.opt.Logger.ErrorContext(ctx, "router step: token limiter failed", "key_id", r.keyID, "err", err)
		return copyError(r.failed(err))
	}
	r.tokenHeaders = tokenHeaders(res.Shown())
	switch {
	case res.Allowed:
		r.tokensHeld = n
		return nil
	case res.TooLarge:
		// No wait would admit it: the client must not retry as it is.
		r.tokenHeaders = append(r.tokenHeaders, contract.SetRawHeaders("x-should-retry", "false")...)
		e := oaierror.RateLimited.With(tooLargeMessage(n, lim), "")
		return &e
	}
	retry := res.RetryAfter()
	r.tokenHeaders = append(r.tokenHeaders, contract.SetRawHeaders(
		"retry-after", strconv.FormatInt(int64((retry+time.Second-1)/time.Second), 10),
		"retry-after-ms", strconv.FormatInt(max(int64((retry+time.Millisecond-1)/time.Millisecond), 1), 10))...)
	e := oaierror.RateLimited.With(refusedMessage(res, n), "")
	return &e
}

// hold reserves the most this request can cost: its prompt
// (promptTokensHeld), and all the tokens it may generate: its output
// limit, which is what the provider gets (limitBody), for each of its n
// choices; from the balance, then under every spend budget of the key,
// its team and its account.
// It fails with 402 when the account cannot pay for that, and with 429
// budget_exceeded when a budget cannot (the balance is asked first, so a
// request both would refuse gets the 402), or 429 budget_held when only
// the holds of requests in flight keep a budget from covering it.
func (r *routerStep) hold(ctx context.Context, cr validChat) *oaierror.Error {
	if r.s.opt.Balance == nil && r.s.opt.Budgets == nil {
		return nil
	}
	m := cr.Model
	amount := m.Cost(config.Tokens{Prompt: promptTokensHeld(cr), Completion: cr.MaxTokens * max(cr.Choices, 1), SearchUnits: cr.Units})
	if m.SearchUnitPrice <= 0 {
		amount = money.Add(money.Cost(promptTokensHeld(cr), m.MostPromptPrice()), money.Cost(cr.MaxTokens*max(cr.Choices, 1), m.OutputPricePerMillion))
	}
	if amount <= 0 {
		return nil // a free model needs no hold
	}
	if e := r.holdBalance(ctx, amount); e != nil {
		return e
	}
	return r.holdBudgets(ctx, amount)
}

// holdBudgets holds amount under every budget of the key, its team and its
// account.
// Holds taken under some budgets before another refused stay on the
// request: its record (of the refusal, at no cost) settles them.
func (r *routerStep) holdBudgets(ctx context.Context, amount money.Nanos) *oaierror.Error {
	if r.s.opt.Budgets == nil {
		return nil
	}
	holds, err := r.s.opt.Budgets.Hold(ctx, r.accountID, r.keyID, amount)
	if len(holds) > 0 {
		r.held, r.budgetLeases = amount, holds
	}
	var ex *budget.Exceeded
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ex) && ex.Momentary():
		// Not spent: the holds of requests in flight end within seconds.
		r.refusal = contract.SetRawHeaders("retry-after", "1")
		e := oaierror.BudgetHeld.With(ex.Message(), "")
		return &e
	case errors.As(err, &ex):
		first := ex.First()
		if f := r.s.opt.BudgetRefused; f != nil {
			f(first.Scope(), first.Period)
		}
		if !first.ResetsAt.IsZero() {
			secs := int64(math.Ceil(first.ResetsAt.Sub(r.s.opt.Now()).Seconds()))
			r.refusal = contract.SetRawHeaders("retry-after", strconv.FormatInt(max(secs, 1), 10))
		}
		e := oaierror.BudgetExceeded.With(ex.Message(), "")
		return &e
	default:
		r.s.opt.Logger.ErrorContext(ctx, "router step: holding under a budget failed", "account_id", r.accountID, "key_id", r.keyID, "err", err)
		return copyError(r.failed(err))
	}
}

// holdBalance holds amount from the account's balance.
func (r *routerStep) holdBalance(ctx context.Context, amount money.Nanos) *oaierror.Error {
	if r.s.opt.Balance == nil {
		return nil
	}
	leaseID, err := r.s.opt.Balance.Hold(ctx, r.accountID, r.requestID, amount)
	switch {
	case err == nil:
		r.held, r.leaseID, r.balanceHeld = amount, leaseID, true
		return nil
	case errors.Is(err, store.ErrInsufficientBalance):
		e := oaierror.InsufficientBalance.With("Your account balance cannot cover this request: it could cost up to $"+amount.String()+
			" (its prompt and max_tokens for each of its n answers). Add credit, or lower max_tokens or n.", "")
		return &e
	default:
		r.s.opt.Logger.ErrorContext(ctx, "router step: holding the balance failed", "account_id", r.accountID, "err", err)
		return copyError(r.failed(err))
	}
}

// giveBack returns what a refused request took before it was refused —
// the balance held before a budget refused it, the holds of the budgets
// that had room, the tokens reserved before a hold failed — since no
// usage record will settle them.
func (r *routerStep) giveBack() {
	if r.held > 0 {
		if r.s.opt.Balance != nil && (r.leaseID != "" || r.balanceHeld) {
			r.s.opt.Balance.Cancel(r.accountID, r.requestID, r.leaseID, r.held)
		}
		if r.s.opt.Budgets != nil && len(r.budgetLeases) > 0 {
			r.s.opt.Budgets.Cancel(r.budgetLeases, r.held)
		}
		r.held, r.leaseID, r.budgetLeases, r.balanceHeld = 0, "", nil, false
	}
	if r.tokensHeld > 0 {
		r.s.settleTokens(&r.admission, store.UsageRecord{})
		r.tokensHeld = 0
	}
}

// done takes the request's hold off this replica's leases: the request
// is over here (its record, written here or by the replica that answered,
// settles it in the database).
func (r *routerStep) done() {
	if r.held <= 0 {
		return
	}
	if r.s.opt.Balance != nil {
		r.s.opt.Balance.Done(r.accountID, r.leaseID, r.held)
	}
	if r.s.opt.Budgets != nil && len(r.budgetLeases) > 0 {
		r.s.opt.Budgets.Done(r.budgetLeases, r.held)
	}
}

// settleTokens settles the request's token reservation, if it made one,
// to the tokens its record bills.
func (s *Server) settleTokens(a *admission, rec store.UsageRecord) {
	if a.tokensHeld <= 0 || s.opt.Tokens == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	used := max(rec.PromptTokens, 0) + max(rec.CompletionTokens, 0)
	if _, err := s.opt.Tokens.SettleTokens(ctx, a.keyID, a.requestID, used); err != nil {
		s.opt.Logger.Error("token limiter: settling the request's tokens failed; its reservation stays counted",
			"key_id", a.keyID, "usage_id", rec.ID, "err", err)
	}
}
