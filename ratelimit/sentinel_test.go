package ratelimit

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// redisBinary finds a Debian redis-server or redis-sentinel, or stops the
// test: Fatal under CI (.ci/services installs both), Skip otherwise.
func redisBinary(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s not found and CI is set: install Debian's redis-server and redis-sentinel (make services)", name)
	}
	t.Skipf("skipping: %s not found (make services installs it; CI runs this test)", name)
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// redisProc is one private redis-server or sentinel, killed when the test
// ends.
type redisProc struct {
	port int
	cmd  *exec.Cmd
}

func startRedisProc(t *testing.T, bin string, args ...string) *redisProc {
	t.Helper()
	port := freePort(t)
	cmd := exec.Command(bin, append(args, "--port", strconv.Itoa(port), "--bind", "127.0.0.1")...)
	cmd.Dir = t.TempDir()
	require.NoError(t, cmd.Start())
	p := &redisProc{port: port, cmd: cmd}
	t.Cleanup(p.kill)
	c := redis.NewClient(&redis.Options{Addr: p.addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		return c.Ping(ctx).Err() == nil
	}, 10*time.Second, 50*time.Millisecond, "%s on port %d did not start", bin, port)
	return p
}

func (p *redisProc) addr() string { return "127.0.0.1:" + strconv.Itoa(p.port) }

func (p *redisProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// sentinelSet is a primary, its replica and three sentinels (quorum two)
// watching them as master "tg".
type sentinelSet struct {
	primary, replica *redisProc
	sentinels        []*redisProc
}

func startSentinelSet(t *testing.T) *sentinelSet {
	t.Helper()
	server, sentinel := redisBinary(t, "redis-server"), redisBinary(t, "redis-sentinel")
	base := []string{"--save", "", "--appendonly", "no"}
	s := &sentinelSet{primary: startRedisProc(t, server, base...)}
	s.replica = startRedisProc(t, server, append(base, "--replicaof", "127.0.0.1", strconv.Itoa(s.primary.port))...)
	for range 3 {
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		require.NoError(t, os.WriteFile(conf, fmt.Appendf(nil,
			"sentinel monitor tg 127.0.0.1 %d 2\nsentinel down-after-milliseconds tg 500\nsentinel failover-timeout tg 5000\n",
			s.primary.port), 0o600))
		s.sentinels = append(s.sentinels, startRedisProc(t, sentinel, conf))
	}
	// Ready when the replica is in sync and every sentinel knows it and
	// the other sentinels.
	rc := redis.NewClient(&redis.Options{Addr: s.replica.addr()})
	defer rc.Close()
	require.Eventually(t, func() bool {
		info, err := rc.Info(context.Background(), "replication").Result()
		if err != nil || !strings.Contains(info, "master_link_status:up") {
			return false
		}
		for _, sp := range s.sentinels {
			sc := redis.NewSentinelClient(&redis.Options{Addr: sp.addr()})
			m, err := sc.Master(context.Background(), "tg").Result()
			sc.Close()
			if err != nil || m["num-slaves"] != "1" || m["num-other-sentinels"] != "2" {
				return false
			}
		}
		return true
	}, 20*time.Second, 100*time.Millisecond, "the sentinel set did not settle")
	return s
}

// url is the redis+sentinel URL of the set, as --redis takes it.
func (s *sentinelSet) url() string {
	u := "redis+sentinel://" + s.sentinels[0].addr() + "/0?master_name=tg"
	for _, sp := range s.sentinels[1:] {
		u += "&addr=" + sp.addr()
	}
	return u
}

// primaryAddr asks a sentinel which server is the primary now.
func (s *sentinelSet) primaryAddr(t *testing.T) string {
	t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: s.sentinels[1].addr()})
	defer sc.Close()
	a, err := sc.GetMasterAddrByName(context.Background(), "tg").Result()
	require.NoError(t, err)
	return net.JoinHostPort(a[0], a[1])
}

// failoverReplica is one Tollgate replica's limiter as serve wires it:
// leased permits from Redis behind a Fallback to memory.
type failoverReplica struct {
	client   redis.UniversalClient
	leased   *Leased
	fallback *Fallback
}

func newFailoverReplica(t *testing.T, url string) *failoverReplica {
	t.Helper()
	c, err := NewRedisClient(url, DefaultPrimaryTimeout)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	l := NewLeased(NewRedis(c, RedisOptions{}), LeaseOptions{Idle: time.Minute})
	t.Cleanup(l.sweeps.Stop)
	fb := NewFallback(l, NewMemory(), nil, WithProbeInterval(100*time.Millisecond))
	t.Cleanup(fb.waitProbes)
	return &failoverReplica{client: c, leased: l, fallback: fb}
}

// hammer checks key from workers goroutines until stop closes, or (stop
// nil) until each has been refused 20 times in a row, and returns the
// admissions.
func hammer(replicas []*failoverReplica, workers int, key string, limit int, now func() time.Time, stop <-chan struct{}) int64 {
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for _, r := range replicas {
		for range workers {
			wg.Go(func() {
				refusedInARow := 0
				for {
					select {
					case <-stop:
						return
					default:
					}
					if stop == nil && refusedInARow >= 20 {
						return
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					res, err := r.fallback.Allow(ctx, key, limit, now())
					cancel()
					switch {
					case err != nil:
						refusedInARow = 0
					case res.Allowed:
						admitted.Add(1)
						refusedInARow = 0
					default:
						refusedInARow++
					}
					time.Sleep(time.Millisecond)
				}
			})
		}
	}
	wg.Wait()
	return admitted.Load()
}

// TestRateLimitsKeepTheirGuaranteesThroughASentinelFailover kills the
// primary of a Sentinel set under load from two replicas and checks what
// the README promises: a limit reached before the failover stays reached
// after it, replicas answer from memory (per replica, at most the limit
// each) while no primary answers, a new window's limit is exact on the new
// primary, permits leased before the failover go back to it, and every
// counter keeps its expiry.
func TestRateLimitsKeepTheirGuaranteesThroughASentinelFailover(t *testing.T) {
	set := startSentinelSet(t)
	a, b := newFailoverReplica(t, set.url()), newFailoverReplica(t, set.url())
	both := []*failoverReplica{a, b}
	// A clock that runs from the start of a window, so the whole test
	// (well under a minute) is one window whenever it runs; the Fallback
	// probes by it.
	start, base := time.Now(), windowAt(time.Now()).start
	now := func() time.Time { return time.Unix(base, 0).Add(time.Since(start)) }
	const limit = 200

	// Replica a leases permits of "leased" and keeps some unused.
	var leasedByA int
	for range 10 {
		res, err := a.fallback.Allow(context.Background(), "leased", limit, now())
		require.NoError(t, err)
		require.True(t, res.Allowed)
		leasedByA++
	}
	// "hot" is at its limit before the failover.
	require.EqualValues(t, limit, hammer(both, 4, "hot", limit, now, nil))
	// What the primary acknowledged has reached the replica.
	pc := redis.NewClient(&redis.Options{Addr: set.primary.addr()})
	require.NoError(t, pc.Do(context.Background(), "WAIT", 1, 2000).Err())
	pc.Close()

	// Under load on "hot", the primary dies.
	stop := make(chan struct{})
	during := make(chan int64, 1)
	go func() { during <- hammer(both, 4, "hot", limit, now, stop) }()
	time.Sleep(200 * time.Millisecond)
	set.primary.kill()
	require.Eventually(t, func() bool { return set.primaryAddr(t) == set.replica.addr() }, 20*time.Second, 100*time.Millisecond,
		"the sentinels did not promote the replica")
	require.Eventually(t, func() bool {
		return a.fallback.Stats().Outages > 0 && !a.fallback.Stats().Down && b.fallback.Stats().Outages > 0 && !b.fallback.Stats().Down
	}, 20*time.Second, 50*time.Millisecond, "the replicas did not go back to Redis after the failover: a %+v, b %+v", a.fallback.Stats(), b.fallback.Stats())
	close(stop)
	admittedDuring := <-during
	// While no primary answered, each replica counted in memory, which
	// knows nothing of Redis's count: at most the limit per replica.
	assert.LessOrEqual(t, admittedDuring, int64(2*limit))
	// Back on Redis (the new primary), "hot" is still at its limit.
	after := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(after) })
	assert.Zero(t, hammer(both, 4, "hot", limit, now, after), "a limit reached before the failover admitted more after it")

	// A key first used after the failover: exactly its limit.
	assert.EqualValues(t, limit, hammer(both, 4, "fresh", limit, now, nil))

	// Replica a gives back the permits it leased before the failover; b
	// gets every one of them.
	a.leased.Close()
	assert.EqualValues(t, limit-leasedByA, hammer([]*failoverReplica{b}, 4, "leased", limit, now, nil),
		"permits leased before the failover were lost")

	// Every counter on the new primary expires with its window.
	nc := redis.NewClient(&redis.Options{Addr: set.replica.addr()})
	defer nc.Close()
	r := NewRedis(nc, RedisOptions{})
	for _, key := range []string{"hot", "fresh", "leased"} {
		ttl, err := nc.PTTL(context.Background(), r.keyName(key, base)).Result()
		require.NoError(t, err)
		assert.True(t, ttl > 0 && ttl <= Window+DefaultRedisGrace, "%s: TTL %v", key, ttl)
	}
}

func TestNewRedisClientTakesEveryKindOfURL(t *testing.T) {
	for url, want := range map[string]string{
		"redis://127.0.0.1:6379/0": "*redis.Client",
		"redis+sentinel://127.0.0.1:26379/0?master_name=tg&addr=127.0.0.1:26380": "*redis.Client",
		"redis+cluster://127.0.0.1:7000?addr=127.0.0.1:7001":                     "*redis.ClusterClient",
	} {
		c, err := NewRedisClient(url, DefaultPrimaryTimeout)
		require.NoError(t, err, url)
		assert.Equal(t, want, fmt.Sprintf("%T", c), url)
		_ = c.Close()
	}
	for url, msg := range map[string]string{
		"redis+sentinel://127.0.0.1:26379/0": "master_name is required",
		"memcached+cluster://127.0.0.1:1":    "invalid URL scheme",
		"redis+memcached://127.0.0.1:1":      "want redis, rediss, unix, redis+sentinel or redis+cluster",
		"127.0.0.1:6379":                     "want scheme://",
	} {
		_, err := NewRedisClient(url, DefaultPrimaryTimeout)
		assert.ErrorContains(t, err, msg, url)
	}
}
