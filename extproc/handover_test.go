package extproc

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/store"
)

// testHandover is a hand-over with every field set.
func testHandover() handover {
	return handover{
		keyID: "key_mine", accountID: "acct_mine", requestID: "r1", modelID: "gpt-4o-mini",
		stream: true, clientUsage: true, started: identNow.Add(-time.Second).Truncate(time.Microsecond),
		leaseID: "lse_1", held: 123456789,
		budgetLeases:  []store.BudgetLease{{Pot: "bgt_a/0/0", Lease: "lse_a"}, {Pot: "bgt_b/1/2", Lease: "lse_b"}},
		endpointState: `{"endpoint":"responses","id":"resp_1"}`, tokensHeld: 4242,
		expires: identNow.Add(time.Minute),
	}
}

// handoverFields is h encoded with key: the request metadata's fields.
func handoverFields(h handover, key []byte) map[string]*structpb.Value {
	return h.encode(key).GetFields()[contract.RequestMetadataNamespace].GetStructValue().GetFields()
}

func TestAHandoverDecodesToWhatWasEncoded(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    handover
	}{
		{"every field", testHandover()},
		{"a chat request held from the balance alone", handover{keyID: "k", accountID: "a", requestID: "r", modelID: "m",
			started: identNow.Truncate(time.Microsecond), leaseID: "lse", held: 1, expires: identNow.Add(time.Minute)}},
		{"a free request", handover{keyID: "k", accountID: "a", requestID: "r", modelID: "m",
			started: identNow.Truncate(time.Microsecond), expires: identNow.Add(time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeHandover(stepKey, handoverFields(tc.h, stepKey), identNow)
			require.NoError(t, err)
			assert.Equal(t, tc.h, got)
		})
	}
}

func TestAnUnsignedHandoverDecodesWithoutAKey(t *testing.T) {
	h := testHandover()
	f := handoverFields(h, nil)
	assert.NotContains(t, f, contract.MetaToken)
	got, err := decodeHandover(nil, f, identNow)
	require.NoError(t, err)
	h.expires = time.Time{}
	assert.Equal(t, h, got)
}

func TestAHandoverWithoutItsIdentityOrModelIsMissing(t *testing.T) {
	for _, name := range []string{contract.MetaKeyID, contract.MetaAccountID, contract.MetaModel} {
		f := handoverFields(testHandover(), nil)
		delete(f, name)
		_, err := decodeHandover(nil, f, identNow)
		assert.ErrorIs(t, err, errHandoverMissing, "without %s", name)
	}
	_, err := decodeHandover(stepKey, nil, identNow)
	assert.ErrorIs(t, err, errHandoverForged, "nothing at all, with a key")
}

func TestNewHandoverTakesTheAdmissionAndTheChatRequest(t *testing.T) {
	m := &config.Model{ID: "gpt-4o", RequestTimeout: config.Duration(2 * time.Minute)}
	a := admission{keyID: "k", accountID: "a", clientRequestID: "client", requestID: "r", stream: true, started: identNow,
		leaseID: "lse", held: 7, balanceHeld: true, budgetLeases: []store.BudgetLease{{Pot: "p", Lease: "l"}}, tokensHeld: 9}
	h := newHandover(&a, validChat{Model: m, Stream: true, ClientUsage: true}, "state")
	assert.Equal(t, handover{keyID: "k", accountID: "a", requestID: "r", modelID: "gpt-4o", stream: true, clientUsage: true,
		started: identNow, leaseID: "lse", held: 7, budgetLeases: a.budgetLeases, endpointState: "state", tokensHeld: 9,
		expires: identNow.Add(3 * time.Minute)}, h)
	back := h.admission("client")
	a.balanceHeld = false // the upstream step holds nothing of its own
	assert.Equal(t, a, back)
}

// The step token binds every field the upstream step uses: changing any
// of them, or presenting it late, or minting one without the key, fails.
func TestAStepTokenIsRefusedIfMintedAlteredExpiredOrMovedToAnotherRequest(t *testing.T) {
	fields := func() map[string]*structpb.Value { return handoverFields(testHandover(), stepKey) }
	_, err := decodeHandover(stepKey, fields(), identNow)
	require.NoError(t, err)
	changes := map[string]*structpb.Value{
		contract.MetaKeyID: structpb.NewStringValue("key_victim"), contract.MetaAccountID: structpb.NewStringValue("acct_victim"),
		contract.MetaRequestID: structpb.NewStringValue("r2"), contract.MetaModel: structpb.NewStringValue("gpt-4o"),
		contract.MetaLease: structpb.NewStringValue("lse_2"), contract.MetaHeld: structpb.NewNumberValue(1),
		contract.MetaStream: structpb.NewBoolValue(false), contract.MetaClientUsage: structpb.NewBoolValue(false),
		contract.MetaStarted: structpb.NewNumberValue(1), contract.MetaExpires: structpb.NewNumberValue(float64(identNow.Add(time.Hour).Unix())),
		contract.MetaResponse: structpb.NewStringValue(`{"id":"resp_2"}`),
		contract.MetaBudgets:  structpb.NewStringValue("bgt_a/0/0#lse_other"),
		contract.MetaTokens:   structpb.NewStringValue("1"),
	}
	for name, v := range changes {
		f := fields()
		f[name] = v
		_, err := decodeHandover(stepKey, f, identNow)
		assert.ErrorIs(t, err, errHandoverForged, "altered %s", name)
		f = fields()
		delete(f, name)
		_, err = decodeHandover(stepKey, f, identNow)
		assert.ErrorIs(t, err, errHandoverForged, "removed %s", name)
	}
	minted := fields()
	minted[contract.MetaToken] = structpb.NewStringValue(stepToken([]byte("a guess"), minted))
	_, err = decodeHandover(stepKey, minted, identNow)
	assert.ErrorIs(t, err, errHandoverForged, "minted without the key")
	none := fields()
	delete(none, contract.MetaToken)
	_, err = decodeHandover(stepKey, none, identNow)
	assert.ErrorIs(t, err, errHandoverForged, "no token")
	_, err = decodeHandover(stepKey, fields(), identNow.Add(time.Minute+time.Second))
	assert.ErrorIs(t, err, errHandoverForged, "expired")
}

// TestStepTokensAreTheSameBytesAsBefore: the token is an HMAC over a text
// every replica must write alike (a rolling upgrade mixes versions); this
// is that text as first defined, with fmt.
func TestStepTokensAreTheSameBytesAsBefore(t *testing.T) {
	f := map[string]*structpb.Value{
		contract.MetaKeyID: structpb.NewStringValue("key_1"), contract.MetaAccountID: structpb.NewStringValue("acct_é"),
		contract.MetaRequestID: structpb.NewStringValue("r"), contract.MetaModel: structpb.NewStringValue("gpt-4o"),
		contract.MetaLease: structpb.NewStringValue("lse_x_1"), contract.MetaHeld: structpb.NewNumberValue(123456789),
		contract.MetaStream: structpb.NewBoolValue(true), contract.MetaClientUsage: structpb.NewBoolValue(false),
		contract.MetaStarted: structpb.NewNumberValue(1750000000123456), contract.MetaExpires: structpb.NewNumberValue(1750000600),
	}
	key := []byte("k")
	mac := hmac.New(sha256.New, key)
	for _, name := range []string{contract.MetaKeyID, contract.MetaAccountID, contract.MetaRequestID, contract.MetaModel, contract.MetaLease} {
		v := f[name].GetStringValue()
		fmt.Fprintf(mac, "%s=%d:%s;", name, len(v), v)
	}
	fmt.Fprintf(mac, "%s=%.0f;%s=%t;%s=%t;%s=%.0f;%s=%.0f;",
		contract.MetaHeld, f[contract.MetaHeld].GetNumberValue(),
		contract.MetaStream, f[contract.MetaStream].GetBoolValue(),
		contract.MetaClientUsage, f[contract.MetaClientUsage].GetBoolValue(),
		contract.MetaStarted, f[contract.MetaStarted].GetNumberValue(),
		contract.MetaExpires, f[contract.MetaExpires].GetNumberValue())
	require.Equal(t, base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), stepToken(key, f))

	// A Responses request's metadata is signed too: after the strings.
	f[contract.MetaResponse] = structpb.NewStringValue(`{"id":"resp_1","store":true}`)
	withResponse := stepToken(key, f)
	assert.NotEqual(t, base64.RawURLEncoding.EncodeToString(mac.Sum(nil)), withResponse)
	f[contract.MetaResponse] = structpb.NewStringValue(`{"id":"resp_1","store":false}`)
	assert.NotEqual(t, withResponse, stepToken(key, f), "altering it breaks the token")

	// So are a request's budget holds, when it has any.
	f[contract.MetaBudgets] = structpb.NewStringValue("bgt_a/0/0#lse_1")
	withBudgets := stepToken(key, f)
	f[contract.MetaBudgets] = structpb.NewStringValue("bgt_a/0/0#lse_2")
	assert.NotEqual(t, withBudgets, stepToken(key, f), "altering them breaks the token")
}
