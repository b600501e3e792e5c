package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// reserveTokensScript counts ARGV[1] tokens in the minute window KEYS[1]
// (limit ARGV[2], 0: none) and the day window KEYS[2] (limit ARGV[3]) if
// both have room, and records the reservation under KEYS[3] (value
// ARGV[6], expiry ARGV[7] ms); a window's first count sets its expiry
// (ARGV[4], ARGV[5] ms). It returns {admitted, minute count, day count}.
// Only windows with a limit are counted.
var reserveTokensScript = redis.NewScript(`
local n, lm, ld = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local um = tonumber(redis.call('GET', KEYS[1]) or '0')
local ud = tonumber(redis.call('GET', KEYS[2]) or '0')
if (lm > 0 and um + n > lm) or (ld > 0 and ud + n > ld) then
	return {0, um, ud}
end
if n == 0 then
	return {1, um, ud}
end
if lm > 0 then
	um = redis.call('INCRBY', KEYS[1], n)
	if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[4]) end
end
if ld > 0 then
	ud = redis.call('INCRBY', KEYS[2], n)
	if redis.call('PTTL', KEYS[2]) < 0 then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
end
if lm > 0 or ld > 0 then
	redis.call('SET', KEYS[3], ARGV[6], 'PX', ARGV[7])
end
return {1, um, ud}
`)

// settleTokensScript takes the reservation KEYS[1] ("n|minute key|day
// key", either key empty when not counted) and adds ARGV[1] − n to each
// window it was counted in that still exists, never below zero. It
// returns 1, or 0 when there is no such reservation. The window keys are
// the reservation's key's, under the same hash tag (one Redis Cluster
// slot).
var settleTokensScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then
	return 0
end
redis.call('DEL', KEYS[1])
local n, mk, dk = string.match(v, '^(%d+)|([^|]*)|(.*)$')
local delta = tonumber(ARGV[1]) - tonumber(n)
for _, k in ipairs({mk, dk}) do
	if k ~= '' and redis.call('EXISTS', ARGV[2] .. k) == 1 then
		if redis.call('INCRBY', ARGV[2] .. k, delta) < 0 then
			redis.call('SET', ARGV[2] .. k, 0, 'KEEPTTL')
		end
	end
end
return 1
`)

var _ TokenLimiter = (*Redis)(nil)

// ReserveTokens implements TokenLimiter in one atomic round trip, so
// replicas together never count more than a limit in a window. Key names:
// <Prefix>{<key>}:t:m:<minute start>, …:t:d:<day start> and …:t:r:<id>.
func (r *Redis) ReserveTokens(ctx context.Context, key, id string, n int64, lim TokenLimits, now time.Time) (TokenResult, error) {
	if err := validateTokens(key, id, n); err != nil {
		return TokenResult{}, err
	}
	w := tokenWindowsAt(now)
	base := r.tokenBase(key)
	mk, dk := "t:m:"+strconv.FormatInt(w.minute.start, 10), "t:d:"+strconv.FormatInt(w.day.start, 10)
	resMinute, resDay, life := "", "", time.Duration(0)
	if lim.PerMinute > 0 {
		resMinute, life = mk, w.minute.reset
	}
	if lim.PerDay > 0 {
		resDay, life = dk, w.day.reset
	}
	value := strconv.FormatInt(n, 10) + "|" + resMinute + "|" + resDay
	vals, err := reserveTokensScript.Run(ctx, r.client, []string{base + mk, base + dk, base + "t:r:" + id},
		n, max(lim.PerMinute, 0), max(lim.PerDay, 0),
		(w.minute.reset + r.grace).Milliseconds(), (w.day.reset + r.grace).Milliseconds(),
		value, (life + r.grace).Milliseconds()).Int64Slice()
	if err != nil {
		return TokenResult{}, fmt.Errorf("ratelimit: redis reserve tokens: %w", err)
	}
	if len(vals) != 3 {
		return TokenResult{}, fmt.Errorf("ratelimit: redis reserve tokens: %d values: %w", len(vals), redis.Nil)
	}
	return w.result(lim, n, vals[1], vals[2], vals[0] == 1), nil
}

// SettleTokens implements TokenLimiter in one atomic round trip.
func (r *Redis) SettleTokens(ctx context.Context, key, id string, used int64) (bool, error) {
	if err := validateTokens(key, id, used); err != nil {
		return false, err
	}
	base := r.tokenBase(key)
	found, err := settleTokensScript.Run(ctx, r.client, []string{base + "t:r:" + id}, used, base).Int()
	if err != nil {
		return false, fmt.Errorf("ratelimit: redis settle tokens: %w", err)
	}
	return found == 1, nil
}

// tokenBase starts the names of key's token windows and reservations.
func (r *Redis) tokenBase(key string) string {
	return r.prefix + "{" + key + "}:"
}

var _ TokenLimiter = (*Leased)(nil)

// ReserveTokens implements TokenLimiter: tokens are not leased; every
// reservation is one round trip to the Redis limiter's counters.
func (l *Leased) ReserveTokens(ctx context.Context, key, id string, n int64, lim TokenLimits, now time.Time) (TokenResult, error) {
	return l.redis.ReserveTokens(ctx, key, id, n, lim, now)
}

// SettleTokens implements TokenLimiter through the Redis limiter.
func (l *Leased) SettleTokens(ctx context.Context, key, id string, used int64) (bool, error) {
	return l.redis.SettleTokens(ctx, key, id, used)
}
