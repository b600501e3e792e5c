package alerts_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
)

func TestASignedBodyVerifiesAndNothingElseDoes(t *testing.T) {
	secret := []byte("whsec_test")
	body := []byte(`{"id":"evt_1","type":"ping"}`)
	at := time.Unix(1_800_000_000, 0)
	h := alerts.Sign(secret, body, at)
	require.Regexp(t, `^t=1800000000,v1=[0-9a-f]{64}$`, h)

	require.NoError(t, alerts.Verify(secret, h, body, at.Add(time.Minute), alerts.DefaultTolerance))
	require.ErrorIs(t, alerts.Verify(secret, h, []byte(`{"id":"evt_2","type":"ping"}`), at, alerts.DefaultTolerance), alerts.ErrSignature, "another body")
	require.ErrorIs(t, alerts.Verify([]byte("whsec_other"), h, body, at, alerts.DefaultTolerance), alerts.ErrSignature, "another secret")
	forged := strings.Replace(h, "t=1800000000", "t=1800000100", 1)
	require.ErrorIs(t, alerts.Verify(secret, forged, body, at, alerts.DefaultTolerance), alerts.ErrSignature, "a timestamp moved")
	// Another signature beside the right one (a secret's change) passes.
	require.NoError(t, alerts.Verify(secret, h+",v1=00ff", body, at, alerts.DefaultTolerance))
	for _, bad := range []string{"", "t=1", "v1=00", "t=x,v1=00", "garbage"} {
		require.ErrorIs(t, alerts.Verify(secret, bad, body, at, alerts.DefaultTolerance), alerts.ErrBadHeader, bad)
	}
}

func TestAReplayOutsideTheToleranceIsRefused(t *testing.T) {
	secret := []byte("whsec_test")
	body := []byte(`{}`)
	at := time.Unix(1_800_000_000, 0)
	h := alerts.Sign(secret, body, at)
	require.NoError(t, alerts.Verify(secret, h, body, at.Add(5*time.Minute), alerts.DefaultTolerance), "at the edge")
	require.ErrorIs(t, alerts.Verify(secret, h, body, at.Add(5*time.Minute+time.Second), alerts.DefaultTolerance), alerts.ErrTimestamp, "too old")
	require.ErrorIs(t, alerts.Verify(secret, h, body, at.Add(-6*time.Minute), alerts.DefaultTolerance), alerts.ErrTimestamp, "from the future")
}

func TestBackoffDoublesFromThirtySecondsToAnHourWithJitter(t *testing.T) {
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute,
		16 * time.Minute, 32 * time.Minute, time.Hour, time.Hour, time.Hour}
	for i, w := range want {
		require.Equal(t, w, alerts.Backoff(i+1, 0.5), "attempt %d", i+1)
		require.Equal(t, time.Duration(float64(w)*0.8), alerts.Backoff(i+1, 0), "attempt %d, least jitter", i+1)
		require.Less(t, alerts.Backoff(i+1, 0.999999), time.Duration(float64(w)*1.2), "attempt %d, most jitter", i+1)
	}
	require.Equal(t, time.Hour, alerts.Backoff(1000, 0.5), "no overflow")
}

func TestSecretsSealedForOneEndpointOpenForItOnly(t *testing.T) {
	key := alerts.SecretKey([]byte("server key"))
	secret, err := alerts.NewSecret(nil)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, alerts.SecretPrefix))
	sealed, err := alerts.SealSecret(key, "whk_a", secret, nil)
	require.NoError(t, err)
	require.NotContains(t, string(sealed), secret[len(alerts.SecretPrefix):])
	got, err := alerts.OpenSecret(key, "whk_a", sealed)
	require.NoError(t, err)
	require.Equal(t, secret, string(got))
	_, err = alerts.OpenSecret(key, "whk_b", sealed)
	require.Error(t, err)
	_, err = alerts.OpenSecret(alerts.SecretKey([]byte("another server key")), "whk_a", sealed)
	require.Error(t, err)
}
