package xds

import (
	"context"
	"sync"
	"testing"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/health"
	"github.com/tollgate/tollgate/internal/testclock"
)

// Deployments of testConfig's gpt-4o (azure's is disabled: no endpoint).
var (
	openaiDeployment = config.DeploymentID("gpt-4o", "openai", "gpt-4o")
	localDeployment  = config.DeploymentID("gpt-4o", "local", "llama")
	claudeDeployment = config.DeploymentID("gpt-4o", "anthropic", "claude-sonnet-4-5")
)

// downSet is a Health whose unavailable deployments the test sets.
type downSet struct {
	mu   sync.Mutex
	down map[string]bool
}

func (d *downSet) Available(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return !d.down[id]
}

func (d *downSet) set(id string, down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.down == nil {
		d.down = map[string]bool{}
	}
	d.down[id] = down
}

// healthOf returns each endpoint's health status by deployment id.
func healthOf(c *clusterv3.Cluster) map[string]corev3.HealthStatus {
	out := map[string]corev3.HealthStatus{}
	for _, l := range c.GetLoadAssignment().GetEndpoints() {
		for _, e := range l.GetLbEndpoints() {
			out[e.GetMetadata().GetFilterMetadata()[contract.MetadataNamespace].GetFields()[contract.MetadataDeploymentKey].GetStringValue()] = e.GetHealthStatus()
		}
	}
	return out
}

// servedHealth is the health of gpt-4o's endpoints in the snapshot s
// serves.
func servedHealth(t *testing.T, s *Server) map[string]corev3.HealthStatus {
	t.Helper()
	snap, err := s.cache.GetSnapshot(NodeGroup)
	require.NoError(t, err)
	c, ok := snap.GetResources(resource.ClusterType)[contract.ClusterName("gpt-4o")].(*clusterv3.Cluster)
	require.True(t, ok)
	require.NoError(t, c.ValidateAll())
	return healthOf(c)
}

func TestMarkUnhealthyMarksOnlyTheDeploymentsThatAreDown(t *testing.T) {
	const (
		unknown   = corev3.HealthStatus_UNKNOWN
		unhealthy = corev3.HealthStatus_UNHEALTHY
	)
	tests := []struct {
		name     string
		health   Health
		wantDown []string
		want     map[string]corev3.HealthStatus
	}{
		{name: "no health marks nothing", health: nil,
			want: map[string]corev3.HealthStatus{openaiDeployment: unknown, localDeployment: unknown, claudeDeployment: unknown}},
		{name: "every deployment available", health: &downSet{},
			want: map[string]corev3.HealthStatus{openaiDeployment: unknown, localDeployment: unknown, claudeDeployment: unknown}},
		{name: "the first priority's deployment down", health: &downSet{down: map[string]bool{openaiDeployment: true}},
			wantDown: []string{openaiDeployment},
			want:     map[string]corev3.HealthStatus{openaiDeployment: unhealthy, localDeployment: unknown, claudeDeployment: unknown}},
		{name: "every deployment down", health: &downSet{down: map[string]bool{openaiDeployment: true, localDeployment: true, claudeDeployment: true}},
			wantDown: []string{openaiDeployment, localDeployment, claudeDeployment},
			want:     map[string]corev3.HealthStatus{openaiDeployment: unhealthy, localDeployment: unhealthy, claudeDeployment: unhealthy}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, err := Clusters(parse(t, testConfig))
			require.NoError(t, err)
			assert.Equal(t, tt.wantDown, MarkUnhealthy(cs, tt.health))
			c := clusterByName(t, cs, contract.ClusterName("gpt-4o"))
			require.NoError(t, c.ValidateAll())
			assert.Equal(t, tt.want, healthOf(c))
			assert.Zero(t, c.GetCommonLbConfig().GetHealthyPanicThreshold().GetValue(),
				"no panic mode: with every endpoint unhealthy Envoy answers 503 instead of using them")
		})
	}
}

// TestACircuitReachesEnvoyWhenItOpensAndLeavesWhenItHalfOpens follows one
// deployment's circuit (package health, on a test clock) through the
// snapshots the server serves.
func TestACircuitReachesEnvoyWhenItOpensAndLeavesWhenItHalfOpens(t *testing.T) {
	ctx := context.Background()
	clk := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tr := health.New(health.Options{Now: clk.Now})
	s := New(ctx, Options{Logger: quietLogger(), Health: tr})
	assert.False(t, s.syncHealth(ctx), "nothing to push before the first configuration")
	require.NoError(t, s.Update(ctx, parse(t, testConfig)))
	healthy := s.Version()
	assert.Equal(t, corev3.HealthStatus_UNKNOWN, servedHealth(t, s)[openaiDeployment])

	for range health.DefaultFailureThreshold - 1 {
		tr.Failure(openaiDeployment)
	}
	assert.False(t, s.syncHealth(ctx), "a closed circuit changes nothing")
	tr.Failure(openaiDeployment)
	require.True(t, s.syncHealth(ctx), "the circuit opened")
	assert.NotEqual(t, healthy, s.Version())
	assert.Equal(t, corev3.HealthStatus_UNHEALTHY, servedHealth(t, s)[openaiDeployment])
	assert.Equal(t, corev3.HealthStatus_UNKNOWN, servedHealth(t, s)[localDeployment], "the next priority takes the requests")
	assert.False(t, s.syncHealth(ctx), "no change, no push")

	clk.Advance(health.DefaultCooldown)
	require.True(t, s.syncHealth(ctx), "half-open: Envoy sends the deployment its probes")
	assert.Equal(t, healthy, s.Version(), "the same content as before it opened, so the same version")
	assert.Equal(t, corev3.HealthStatus_UNKNOWN, servedHealth(t, s)[openaiDeployment])

	tr.Failure(openaiDeployment)
	require.True(t, s.syncHealth(ctx), "a failed probe opens it again")
	assert.Equal(t, corev3.HealthStatus_UNHEALTHY, servedHealth(t, s)[openaiDeployment])

	// A reloaded configuration keeps the health.
	require.NoError(t, s.Update(ctx, parse(t, testConfig+"\n")))
	assert.Equal(t, corev3.HealthStatus_UNHEALTHY, servedHealth(t, s)[openaiDeployment])
}

// fakeTimer is Run's timer, fired by the test: every request for one is
// sent on asked until ctx ends.
type fakeTimer struct {
	ctx   context.Context
	asked chan timerRequest
}

type timerRequest struct {
	d    time.Duration
	fire chan time.Time
}

func (f fakeTimer) after(d time.Duration) <-chan time.Time {
	r := timerRequest{d: d, fire: make(chan time.Time, 1)}
	select {
	case f.asked <- r:
	case <-f.ctx.Done():
	}
	return r.fire
}

// TestRunPushesAHealthChangeAtOnceAndCoalescesTheNextOnes drives Run with a
// fake timer: the first change is pushed as soon as it is told; changes
// told while Run waits out the push interval become one push when it
// ends, with the health as it is then.
func TestRunPushesAHealthChangeAtOnceAndCoalescesTheNextOnes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	down := &downSet{}
	timer := fakeTimer{ctx: ctx, asked: make(chan timerRequest)}
	s := New(ctx, Options{Logger: quietLogger(), Health: down, PushInterval: 2 * time.Second, after: timer.after})
	require.NoError(t, s.Update(ctx, parse(t, testConfig)))
	healthy := s.Version()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Run(ctx)
	}()
	next := func() timerRequest {
		t.Helper()
		select {
		case r := <-timer.asked:
			return r
		case <-ctx.Done():
			t.Fatal("Run asked for no timer")
			return timerRequest{}
		}
	}

	idle := next()
	assert.Equal(t, 2*time.Second, idle.d, "Run asks Health again every push interval")
	down.set(openaiDeployment, true)
	s.HealthChanged()
	gap := next() // asked for once the push is made
	assert.Equal(t, 2*time.Second, gap.d)
	assert.Equal(t, corev3.HealthStatus_UNHEALTHY, servedHealth(t, s)[openaiDeployment], "pushed at once")
	opened := s.Version()

	// The deployment flaps within the interval: nothing is pushed yet.
	for i := range 10 {
		down.set(openaiDeployment, i%2 == 1)
		s.HealthChanged()
	}
	assert.Equal(t, opened, s.Version())
	down.set(openaiDeployment, false)
	gap.fire <- time.Time{}
	next() // Run waits again: the told changes wake it at once
	next() // the push is made, then the interval after it
	assert.Equal(t, healthy, s.Version(), "one push, of the health at the end of the interval")
	assert.Equal(t, corev3.HealthStatus_UNKNOWN, servedHealth(t, s)[openaiDeployment])

	cancel()
	<-done
}

func TestRunWithoutHealthReturns(t *testing.T) {
	s := New(context.Background(), Options{Logger: quietLogger()})
	s.Run(context.Background()) // returns at once: there is nothing to follow
}
