// Package decision is ext_authz's admission of one request in a form the
// router step can verify: the key and account ext_authz authenticated, the
// request's id and an expiry, under an HMAC keyed by the secret every
// replica shares (the ext_proc step key). The router step takes its identity
// from a decision it verified, never from a header anyone could have set, so
// a caller of the gRPC port who skips ext_authz cannot act as another key.
//
// The value travels in one request header (contract.HeaderDecision):
//
//	v1.<payload, base64url>.<HMAC-SHA256, base64url>
//
// where the payload is "<len>:<key id>;<len>:<account id>;<len>:<request
// id>;<expiry, Unix seconds>" and the MAC covers "v1." and the payload. The
// MAC key is derived from the shared secret (HMAC of it over a fixed label),
// so no decision can pass for a step token or the other way round.
package decision

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Lifetime is how long a decision is accepted after ext_authz made it:
// enough for the request's body to arrive and reach the router step (the
// proxy buffers it between the two), not enough to keep a captured
// decision useful.
const Lifetime = 3 * time.Minute

// maxValue bounds a header value this package will look at (a decision
// for a request id of 1 KiB is well under it).
const maxValue = 4096

// Decision is one admitted request.
type Decision struct {
	KeyID, AccountID string
	// RequestID is the request's x-request-id as ext_authz saw it.
	RequestID string
	Expires   time.Time
}

// Errors of Verify. None of them says anything of the value's content.
var (
	ErrMissing   = errors.New("no decision")
	ErrMalformed = errors.New("malformed decision")
	ErrSignature = errors.New("decision signature does not match")
	ErrExpired   = errors.New("decision expired")
)

const version = "v1."

// label derives the decision MAC key from the shared secret.
const label = "tollgate ext_authz decision v1"

// Key signs and verifies decisions; the zero Key signs nothing.
type Key struct {
	mac []byte
	// macs holds *macState, keyed with mac: a decision is signed and
	// verified on every request, and an HMAC's setup costs more
	// allocations than the rest of the work.
	macs *sync.Pool
}

// macState is a reusable HMAC with room for its input and output, so
// that signing and verifying allocate only what they return.
type macState struct {
	h   hash.Hash
	buf []byte // the MAC's input, then the decoded payload (bounded by maxValue)
	out []byte // a signed value as it is made (bounded as buf)
	sum [sha256.Size]byte
	got [sha256.Size]byte
}

// versionBytes is version as the MAC's first input.
var versionBytes = []byte(version)

// enc is the encoding of the payload and the MAC.
var enc = base64.RawURLEncoding

// NewKey derives the decision key from the replicas' shared secret; an
// empty secret gives the zero Key.
func NewKey(shared []byte) Key {
	if len(shared) == 0 {
		return Key{}
	}
	m := hmac.New(sha256.New, shared)
	m.Write([]byte(label))
	mac := m.Sum(nil)
	return Key{mac: mac, macs: &sync.Pool{New: func() any { return &macState{h: hmac.New(sha256.New, mac)} }}}
}

// IsZero reports whether the key was made from no secret.
func (k Key) IsZero() bool { return len(k.mac) == 0 }

// state takes a macState (reset) from the pool; give it back with put.
func (k Key) state() *macState {
	if k.macs == nil { // the zero Key: an HMAC under the empty key
		return &macState{h: hmac.New(sha256.New, k.mac)}
	}
	st := k.macs.Get().(*macState)
	st.h.Reset()
	return st
}

func (k Key) put(st *macState) {
	if k.macs != nil && cap(st.buf) <= maxValue && cap(st.out) <= maxValue {
		k.macs.Put(st)
	}
}

// mac is the MAC of "v1." and payload (the payload's base64 text), in st.sum.
func (st *macState) mac(payload []byte) []byte {
	st.h.Write(versionBytes)
	st.h.Write(payload)
	return st.h.Sum(st.sum[:0])
}

// Sign is the header value for d.
func (k Key) Sign(d Decision) string {
	st := k.state()
	defer k.put(st)
	p := st.buf[:0]
	for _, s := range [3]string{d.KeyID, d.AccountID, d.RequestID} {
		p = append(strconv.AppendInt(p, int64(len(s)), 10), ':')
		p = append(append(p, s...), ';')
	}
	p = strconv.AppendInt(p, d.Expires.Unix(), 10)
	st.buf = p
	out := enc.AppendEncode(append(st.out[:0], version...), p)
	sum := st.mac(out[len(version):])
	out = enc.AppendEncode(append(out, '.'), sum)
	st.out = out
	return string(out)
}

// Verify checks value's signature (in constant time) and expiry against
// now, and returns the decision it carries.
func (k Key) Verify(value string, now time.Time) (Decision, error) {
	if value == "" {
		return Decision{}, ErrMissing
	}
	rest, ok := strings.CutPrefix(value, version)
	if !ok || len(value) > maxValue || k.IsZero() {
		return Decision{}, ErrMalformed
	}
	payload, mac, ok := strings.Cut(rest, ".")
	if !ok || len(mac) != enc.EncodedLen(sha256.Size) {
		return Decision{}, ErrMalformed
	}
	st := k.state()
	defer k.put(st)
	st.buf = append(st.buf[:0], mac...)
	if n, err := enc.Decode(st.got[:], st.buf); err != nil || n != sha256.Size {
		return Decision{}, ErrMalformed
	}
	st.buf = append(st.buf[:0], payload...)
	if !hmac.Equal(st.got[:], st.mac(st.buf)) {
		return Decision{}, ErrSignature
	}
	n := len(st.buf)
	buf, err := enc.AppendDecode(st.buf, st.buf[:n]) // decoded after the text
	if err != nil {
		return Decision{}, ErrMalformed
	}
	st.buf = buf
	d, err := parse(string(buf[n:]))
	if err != nil {
		return Decision{}, err
	}
	if !now.Before(d.Expires) {
		return Decision{}, ErrExpired
	}
	return d, nil
}

// parse reads a signed payload: three length-prefixed strings, then the
// expiry.
func parse(p string) (Decision, error) {
	var fields [3]string
	for i := range fields {
		n, rest, ok := strings.Cut(p, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size >= len(rest) || rest[size] != ';' {
			return Decision{}, fmt.Errorf("%w: field %d", ErrMalformed, i)
		}
		fields[i], p = rest[:size], rest[size+1:]
	}
	exp, err := strconv.ParseInt(p, 10, 64)
	if err != nil {
		return Decision{}, fmt.Errorf("%w: expiry", ErrMalformed)
	}
	return Decision{KeyID: fields[0], AccountID: fields[1], RequestID: fields[2], Expires: time.Unix(exp, 0)}, nil
}
