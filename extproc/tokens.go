package extproc

import (
	"context"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/ratelimit"
	"github.com/tollgate/tollgate/store"
)

// This file applies a key's token limits (tokens per UTC minute and per
// UTC day; store.Key.TPMLimit, TokensPerDay, or the plan's defaults). The
// router step reserves the most tokens the request may use, the prompt
// it holds money for and its held output limit for each of its n
// answers, before it holds the money; the request's usage record settles
// the reservation to the tokens it bills (prompt plus completion: cached
// and cache-write tokens are part of the prompt, reasoning tokens part of
// the completion), wherever the record is made (both in holds.go). The
// answer carries OpenAI's x-ratelimit-*-tokens headers.

// settleTimeout bounds one settlement (the limiter's own primary timeout
// is shorter).
const settleTimeout = 2 * time.Second

// tokenLimits are the key's token limits: its own, or its plan's default
// for each one that is Off.
func tokenLimits(cfg *config.Config, key store.Key, acct store.Account) ratelimit.TokenLimits {
	var lim ratelimit.TokenLimits
	if p, ok := cfg.Plan(acct.Plan); ok {
		lim = ratelimit.TokenLimits{PerMinute: p.DefaultTPM, PerDay: p.DefaultTokensPerDay}
	}
	if key.TPMLimit != nil {
		lim.PerMinute = *key.TPMLimit
	}
	if key.TokensPerDay != nil {
		lim.PerDay = *key.TokensPerDay
	}
	return lim
}

// peekTokens sets the headers of an answer refused before its tokens
// were reserved (an invalid body), from the key's windows as they are,
// counting nothing.
func (r *routerStep) peekTokens() {
	if r.s.opt.Tokens == nil || r.keyID == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	_, acct, err := r.identity(ctx)
	if err != nil {
		return
	}
	lim := tokenLimits(r.cfg, r.key, acct)
	if lim.PerMinute <= 0 && lim.PerDay <= 0 {
		return
	}
	id := r.requestID
	if id == "" {
		id = "peek"
	}
	if res, err := r.s.opt.Tokens.ReserveTokens(ctx, r.keyID, id, 0, lim, r.s.tokenClock()); err == nil {
		r.tokenHeaders = tokenHeaders(res.Shown())
	}
}

// refusedMessage names the limit a reservation found full.
func refusedMessage(res ratelimit.TokenResult, n int64) string {
	w, unit := res.Minute, "tokens per minute"
	if !w.Refused {
		w, unit = res.Day, "tokens per day"
	}
	return "Rate limit reached for this API key (" + unit + "): limit " + strconv.FormatInt(w.Limit, 10) +
		", remaining " + strconv.FormatInt(w.Remaining, 10) + ", this request may use up to " + strconv.FormatInt(n, 10) +
		" (its prompt and max_tokens for each of its n answers). Retry after the time in the Retry-After header, or lower max_tokens."
}

// tooLargeMessage says a request can never pass its key's token limits.
func tooLargeMessage(n int64, lim ratelimit.TokenLimits) string {
	limit, unit := lim.PerMinute, "tokens per minute"
	if limit <= 0 || (lim.PerDay > 0 && lim.PerDay < limit) {
		limit, unit = lim.PerDay, "tokens per day"
	}
	return "This request may use up to " + strconv.FormatInt(n, 10) + " tokens (its prompt and max_tokens for each of its n answers), " +
		"more than this API key's limit of " + strconv.FormatInt(limit, 10) + " " + unit + " allows: it can never pass. Lower max_tokens or n, or shorten the prompt."
}

// tokenHeaders are OpenAI's token rate-limit headers for window w.
func tokenHeaders(w ratelimit.TokenWindow) []*corev3.HeaderValueOption {
	return contract.SetRawHeaders(
		"x-ratelimit-limit-tokens", strconv.FormatInt(w.Limit, 10),
		"x-ratelimit-remaining-tokens", strconv.FormatInt(w.Remaining, 10),
		"x-ratelimit-reset-tokens", max(w.Reset, 0).Round(time.Millisecond).String(),
	)
}

func (s *Server) tokenClock() time.Time {
	if s.opt.TokenClock != nil {
		return s.opt.TokenClock()
	}
	return s.opt.Now()
}
