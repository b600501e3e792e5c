package ratelimit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// NewRedisClient connects to the Redis a URL names, tuned for the request
// path as TuneClientOptions says, whichever way the Redis is run:
//
//	redis://[user:pass@]host:6379/0, rediss://…, unix:///path.sock
//	    one server (go-redis's ParseURL)
//	redis+sentinel://[sentinel-user:sentinel-pass@]host:26379/0?master_name=NAME&addr=host2:26379&password=PASS
//	    a Sentinel set: the client asks the sentinels for the primary and
//	    follows a failover (go-redis's ParseFailoverURL; rediss+sentinel
//	    for TLS)
//	redis+cluster://[user:pass@]host:6379?addr=host2:6379
//	    a Redis Cluster (go-redis's ParseClusterURL; rediss+cluster for
//	    TLS). A key's windows share one slot (the hash tag in keyName).
//
// wait is the per-check wait (--redis-timeout); it sizes the dial timeout.
func NewRedisClient(rawURL string, wait time.Duration) (redis.UniversalClient, error) {
	scheme, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, errors.New("redis URL: want scheme://…")
	}
	base, mode, _ := strings.Cut(scheme, "+")
	switch mode {
	case "":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, err
		}
		TuneClientOptions(o, wait)
		return redis.NewClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(base + "://" + rest)
		if err != nil {
			return nil, err
		}
		if o.MasterName == "" {
			return nil, errors.New("redis+sentinel URL: master_name is required (?master_name=NAME)")
		}
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries, o.DialTimeout = tunedDial(wait)
		return redis.NewFailoverClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(base + "://" + rest)
		if err != nil {
			return nil, err
		}
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries, o.DialTimeout = tunedDial(wait)
		return redis.NewClusterClient(o), nil
	default:
		return nil, fmt.Errorf("redis URL scheme %q: want redis, rediss, unix, redis+sentinel or redis+cluster", scheme)
	}
}

// tunedDial is TuneClientOptions's choice for the other kinds of client:
// contexts bound commands, no retries, one dial attempt bounded by a few
// waits.
func tunedDial(wait time.Duration) (ctxTimeout bool, maxRetries, dialerRetries int, dialTimeout time.Duration) {
	return true, -1, 1, max(4*wait, 500*time.Millisecond)
}
