package decision

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var now = time.Unix(1750000000, 0)

func sample() Decision {
	return Decision{KeyID: "key_1", AccountID: "acct_;:é", RequestID: "req-1", Expires: now.Add(Lifetime)}
}

func TestASignedDecisionVerifiesToWhatWasSigned(t *testing.T) {
	k := NewKey([]byte("shared"))
	got, err := k.Verify(k.Sign(sample()), now)
	require.NoError(t, err)
	assert.Equal(t, sample(), got)
}

func TestDecisionsThatWereNotSignedAsTheyAreAreRefused(t *testing.T) {
	k := NewKey([]byte("shared"))
	good := k.Sign(sample())
	payload := strings.Split(good, ".")[1]
	mac := strings.Split(good, ".")[2]
	other := sample()
	other.AccountID = "acct_victim"
	otherPayload := strings.Split(k.Sign(other), ".")[1]
	flipped := []byte(mac)
	if flipped[0] == 'A' {
		flipped[0] = 'B'
	} else {
		flipped[0] = 'A'
	}
	for name, tc := range map[string]struct {
		value string
		want  error
	}{
		"none":                    {"", ErrMissing},
		"not a decision":          {"key_1", ErrMalformed},
		"another version":         {"v2." + payload + "." + mac, ErrMalformed},
		"no signature":            {"v1." + payload, ErrMalformed},
		"signature not base64":    {"v1." + payload + ".!!", ErrMalformed},
		"altered signature":       {"v1." + payload + "." + string(flipped), ErrSignature},
		"another account's claim": {"v1." + otherPayload + "." + mac, ErrSignature},
		"signed by another key":   {NewKey([]byte("other")).Sign(sample()), ErrSignature},
		"too long":                {good + strings.Repeat("a", maxValue), ErrMalformed},
		"signed garbage":          {signed(k, "3:abc"), ErrMalformed},
		"signed, bad expiry":      {signed(k, "1:a;1:b;1:c;soon"), ErrMalformed},
		"signed, length too long": {signed(k, "9:a;1:b;1:c;1"), ErrMalformed},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := k.Verify(tc.value, now)
			assert.ErrorIs(t, err, tc.want)
		})
	}
}

// signed is a correctly signed value around an arbitrary payload.
func signed(k Key, raw string) string {
	p := base64.RawURLEncoding.EncodeToString([]byte(raw))
	st := k.state()
	defer k.put(st)
	return "v1." + p + "." + base64.RawURLEncoding.EncodeToString(st.mac([]byte(p)))
}

// TestSigningAndVerifyingAllocateOnlyWhatTheyReturn: both run on every
// request (ext_authz signs, the router step verifies).
func TestSigningAndVerifyingAllocateOnlyWhatTheyReturn(t *testing.T) {
	k := NewKey([]byte("shared"))
	d := Decision{KeyID: "key_1", AccountID: "acct_1", RequestID: "0123456789abcdef", Expires: time.Unix(2_000_000_000, 0)}
	v := k.Sign(d) // the pool's first state
	got, err := k.Verify(v, time.Unix(1_999_999_000, 0))
	require.NoError(t, err)
	assert.Equal(t, d, got)
	if raceEnabled {
		t.Log("allocations not counted: the race detector makes sync.Pool drop items")
		return
	}
	assert.LessOrEqual(t, testing.AllocsPerRun(200, func() { v = k.Sign(d) }), 1.0, "the value (its buffer is pooled)")
	assert.LessOrEqual(t, testing.AllocsPerRun(200, func() { got, err = k.Verify(v, time.Unix(1_999_999_000, 0)) }), 1.0, "the decision's text")
}

func TestADecisionExpires(t *testing.T) {
	k := NewKey([]byte("shared"))
	v := k.Sign(sample())
	_, err := k.Verify(v, now.Add(Lifetime-time.Second))
	require.NoError(t, err)
	_, err = k.Verify(v, now.Add(Lifetime))
	assert.ErrorIs(t, err, ErrExpired)
}

func TestTheZeroKeyVerifiesNothing(t *testing.T) {
	var zero Key
	assert.True(t, zero.IsZero())
	assert.True(t, NewKey(nil).IsZero())
	_, err := zero.Verify(zero.Sign(sample()), now)
	assert.ErrorIs(t, err, ErrMalformed)
}

func TestErrorsNeverQuoteTheValue(t *testing.T) {
	k := NewKey([]byte("shared"))
	for _, v := range []string{"v1.c2VjcmV0.x", signed(k, "6:secret")} {
		_, err := k.Verify(v, now)
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "secret")
		assert.NotContains(t, err.Error(), "c2VjcmV0")
	}
}
