package extproc

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
)

// This file is the hand-over from the router step to every upstream
// attempt: the request metadata (contract.RequestMetadataNamespace) the
// router step's body answer sets, which the proxy passes to the upstream
// step's filter. encode writes it and signs it (the step token, an
// HMAC-SHA256 with the key every replica shares); decodeHandover checks
// the token and reads it back. The field names and the signed text are a
// wire format: Envoy's access log reads some fields, and replicas of
// different versions sign and check one another's during a rolling
// upgrade.

// handover is everything the router step hands the upstream step (and,
// through it, the usage record) of an admitted request.
type handover struct {
	keyID, accountID string
	requestID        string // drawn at admission; names the hold and the usage record
	modelID          string
	stream           bool
	clientUsage      bool // the client asked for stream_options.include_usage
	started          time.Time
	leaseID          string              // the lease the hold came from; "" for a reservation of its own
	held             money.Nanos         // money held for the request
	budgetLeases     []store.BudgetLease // its holds under spend budgets, each of held
	endpointState    string              // the endpoint's state for its attempts ("" for chat completions)
	tokensHeld       int64               // tokens reserved against the key's token limits
	// expires is when the token stops being accepted (attempts may run
	// until the request timeout, and a little after); zero when unsigned.
	expires time.Time
}

// newHandover is the hand-over of the admission a (its model, its hold)
// with the chat request's stream flags and the endpoint's state, valid
// until the model's request timeout and a minute after.
func newHandover(a *admission, cr validChat, endpointState string) handover {
	return handover{
		keyID: a.keyID, accountID: a.accountID, requestID: a.requestID, modelID: cr.Model.ID,
		stream: cr.Stream, clientUsage: cr.ClientUsage, started: a.started,
		leaseID: a.leaseID, held: a.held, budgetLeases: a.budgetLeases,
		endpointState: endpointState, tokensHeld: a.tokensHeld,
		expires: a.started.Add(cr.Model.RequestTimeout.D() + time.Minute),
	}
}

// admission is what the upstream step knows of the request from the
// hand-over and the attempt's x-request-id: all but its model, which the
// step looks up from the deployment (and checks against modelID).
func (h *handover) admission(clientRequestID string) admission {
	return admission{
		keyID: h.keyID, accountID: h.accountID, clientRequestID: clientRequestID, requestID: h.requestID,
		stream: h.stream, started: h.started,
		leaseID: h.leaseID, held: h.held, budgetLeases: h.budgetLeases, tokensHeld: h.tokensHeld,
	}
}

// encode is the hand-over as the body answer's dynamic metadata, signed
// with stepKey (unsigned, and without an expiry, when stepKey is empty).
func (h *handover) encode(stepKey []byte) *structpb.Struct {
	v := new(metaValues) // every value in one allocation
	fields := make(map[string]*structpb.Value, len(v.vals))
	fields[contract.MetaKeyID] = v.str(h.keyID)
	fields[contract.MetaAccountID] = v.str(h.accountID)
	fields[contract.MetaRequestID] = v.str(h.requestID)
	fields[contract.MetaModel] = v.str(h.modelID)
	fields[contract.MetaStream] = v.flag(h.stream)
	fields[contract.MetaClientUsage] = v.flag(h.clientUsage)
	fields[contract.MetaStarted] = v.number(float64(h.started.UnixMicro()))
	fields[contract.MetaLease] = v.str(h.leaseID)
	fields[contract.MetaHeld] = v.number(float64(h.held))
	fields[contract.MetaBudgets] = v.str(encodeBudgetLeases(h.budgetLeases))
	if h.endpointState != "" {
		fields[contract.MetaResponse] = v.str(h.endpointState)
	}
	if h.tokensHeld > 0 {
		fields[contract.MetaTokens] = v.str(strconv.FormatInt(h.tokensHeld, 10))
	}
	if len(stepKey) > 0 {
		fields[contract.MetaExpires] = v.number(float64(h.expires.Unix()))
		fields[contract.MetaToken] = v.str(stepToken(stepKey, fields))
	}
	v.inner.Fields = fields
	v.nsValue.Kind = &v.nsKind
	v.nsKind.StructValue = &v.inner
	v.outer.Fields = map[string]*structpb.Value{contract.RequestMetadataNamespace: &v.nsValue}
	return &v.outer
}

var (
	// errHandoverForged is a hand-over without a valid step token:
	// forged, replayed past its expiry, or altered.
	errHandoverForged = errors.New("request metadata without a valid router-step token")
	// errHandoverMissing is a hand-over without its identity or model:
	// the proxy did not forward the metadata to the upstream step.
	errHandoverMissing = errors.New("no request metadata; is " + contract.RequestMetadataNamespace + " forwarded to the upstream ext_proc filter?")
)

// decodeHandover reads the request metadata's fields f, checking their
// token against stepKey and now when stepKey is set. A hand-over with no
// start time starts now.
func decodeHandover(stepKey []byte, f map[string]*structpb.Value, now time.Time) (handover, error) {
	if len(stepKey) > 0 && !validStepToken(stepKey, f, now) {
		return handover{}, errHandoverForged
	}
	h := handover{
		keyID:         f[contract.MetaKeyID].GetStringValue(),
		accountID:     f[contract.MetaAccountID].GetStringValue(),
		requestID:     f[contract.MetaRequestID].GetStringValue(),
		modelID:       f[contract.MetaModel].GetStringValue(),
		stream:        f[contract.MetaStream].GetBoolValue(),
		clientUsage:   f[contract.MetaClientUsage].GetBoolValue(),
		started:       now,
		leaseID:       f[contract.MetaLease].GetStringValue(),
		held:          money.Nanos(f[contract.MetaHeld].GetNumberValue()),
		budgetLeases:  parseBudgetLeases(f[contract.MetaBudgets].GetStringValue()),
		endpointState: f[contract.MetaResponse].GetStringValue(),
	}
	h.tokensHeld, _ = strconv.ParseInt(f[contract.MetaTokens].GetStringValue(), 10, 64)
	if us := f[contract.MetaStarted].GetNumberValue(); us > 0 {
		h.started = time.UnixMicro(int64(us))
	}
	if s := f[contract.MetaExpires].GetNumberValue(); s > 0 {
		h.expires = time.Unix(int64(s), 0)
	}
	if h.keyID == "" || h.accountID == "" || h.modelID == "" {
		return handover{}, errHandoverMissing
	}
	return h, nil
}

// metaValues holds the request metadata's values and structs, so that
// building them is one allocation, not two per field: room for every
// field at once (nine strings with the token, three numbers, two flags).
type metaValues struct {
	strs           [9]structpb.Value_StringValue
	nums           [3]structpb.Value_NumberValue
	flags          [2]structpb.Value_BoolValue
	vals           [14]structpb.Value
	ns, nn, nf, nv int

	inner, outer structpb.Struct
	nsValue      structpb.Value
	nsKind       structpb.Value_StructValue
}

func (m *metaValues) next() *structpb.Value {
	v := &m.vals[m.nv]
	m.nv++
	return v
}

func (m *metaValues) str(s string) *structpb.Value {
	k := &m.strs[m.ns]
	m.ns++
	k.StringValue = s
	v := m.next()
	v.Kind = k
	return v
}

func (m *metaValues) number(f float64) *structpb.Value {
	k := &m.nums[m.nn]
	m.nn++
	k.NumberValue = f
	v := m.next()
	v.Kind = k
	return v
}

func (m *metaValues) flag(b bool) *structpb.Value {
	k := &m.flags[m.nf]
	m.nf++
	k.BoolValue = b
	v := m.next()
	v.Kind = k
	return v
}

// stepMAC is a step token's HMAC and buffer, reused through macs.
type stepMAC struct {
	key []byte
	mac hash.Hash
	buf []byte
	sum [sha256.Size]byte
}

var macs sync.Pool // of *stepMAC

// stepToken is the HMAC-SHA256 of the request metadata's fields (all but
// the token), in a fixed order, base64url.
func stepToken(key []byte, f map[string]*structpb.Value) string {
	m, _ := macs.Get().(*stepMAC)
	if m == nil || !bytes.Equal(m.key, key) {
		m = &stepMAC{key: bytes.Clone(key), mac: hmac.New(sha256.New, key), buf: make([]byte, 0, 384)}
	}
	defer macs.Put(m)
	m.mac.Reset()
	// The same bytes as "%s=%d:%s;" per string field and "%s=%.0f;" or
	// "%s=%t;" per number or flag, appended without fmt.
	b := m.buf[:0]
	for _, name := range tokenStrings {
		if (name == contract.MetaResponse || name == contract.MetaBudgets || name == contract.MetaTokens) && f[name].GetStringValue() == "" {
			// Only a Responses request has the first, one held under
			// budgets the second, one of a key with token limits the
			// third: any other request's token stays the bytes it was,
			// across a rolling upgrade.
			continue
		}
		v := f[name].GetStringValue()
		b = append(append(b, name...), '=')
		b = append(append(strconv.AppendInt(b, int64(len(v)), 10), ':'), v...)
		b = append(b, ';')
	}
	for _, n := range tokenNumbers {
		b = append(append(b, n.name...), '=')
		if n.flag {
			b = strconv.AppendBool(b, f[n.name].GetBoolValue())
		} else {
			b = strconv.AppendFloat(b, f[n.name].GetNumberValue(), 'f', 0, 64)
		}
		b = append(b, ';')
	}
	m.buf = b
	m.mac.Write(b)
	return base64.RawURLEncoding.EncodeToString(m.mac.Sum(m.sum[:0]))
}

// The fields a step token signs, in order: strings, then numbers and
// flags.
var (
	tokenStrings = []string{contract.MetaKeyID, contract.MetaAccountID, contract.MetaRequestID, contract.MetaModel, contract.MetaLease, contract.MetaBudgets, contract.MetaResponse, contract.MetaTokens}
	tokenNumbers = []struct {
		name string
		flag bool
	}{{contract.MetaHeld, false}, {contract.MetaStream, true}, {contract.MetaClientUsage, true}, {contract.MetaStarted, false}, {contract.MetaExpires, false}}
)

// validStepToken checks the token of request metadata against key and the
// clock.
func validStepToken(key []byte, f map[string]*structpb.Value, now time.Time) bool {
	got := f[contract.MetaToken].GetStringValue()
	if got == "" || int64(f[contract.MetaExpires].GetNumberValue()) < now.Unix() {
		return false
	}
	return hmac.Equal([]byte(got), []byte(stepToken(key, f)))
}

// encodeBudgetLeases writes a request's budget holds for the request
// metadata (contract.MetaBudgets): "<pot>#<lease>" joined by commas. Pot
// and lease ids use neither character.
func encodeBudgetLeases(holds []store.BudgetLease) string {
	var b strings.Builder
	for i, h := range holds {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(h.Pot)
		b.WriteByte('#')
		b.WriteString(h.Lease)
	}
	return b.String()
}

// parseBudgetLeases reads encodeBudgetLeases' text (signed by the router
// step, so well formed; anything else is dropped).
func parseBudgetLeases(s string) []store.BudgetLease {
	if s == "" {
		return nil
	}
	var out []store.BudgetLease
	for part := range strings.SplitSeq(s, ",") {
		pot, lease, ok := strings.Cut(part, "#")
		if ok && pot != "" && lease != "" && len(out) < store.MaxBudgets*2 {
			out = append(out, store.BudgetLease{Pot: pot, Lease: lease})
		}
	}
	return out
}
