// Package alerts delivers an account's alert events (budget thresholds, a
// low balance, test pings) to its webhook endpoints: it signs each body
// with the endpoint's secret (Sign, and Verify for receivers), posts it
// with a client that refuses private addresses at dial time and never
// follows redirects (Client), and runs the worker that claims due
// deliveries from the store's outbox, retries failures with backoff for a
// day, and never sends a delivered one again (Worker).
package alerts

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Headers of a delivery.
const (
	// SignatureHeader is "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>" under the endpoint's secret>".
	SignatureHeader = "Tollgate-Signature"
	// EventIDHeader is the event's id: the same on every attempt, so a
	// receiver can drop a repeat.
	EventIDHeader = "Tollgate-Event-Id"
)

// DefaultTolerance is how old a signature's timestamp Verify accepts by
// default: a receiver should refuse older ones (a replay).
const DefaultTolerance = 5 * time.Minute

// Verify's errors.
var (
	ErrBadHeader = errors.New("alerts: malformed signature header")
	ErrSignature = errors.New("alerts: signature does not match")
	ErrTimestamp = errors.New("alerts: timestamp outside the tolerance (a replay?)")
)

// Sign returns the signature header for body sent at t.
func Sign(secret, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a delivery as a receiver should: the header's v1
// signature (any of them, during a secret's change) is the HMAC of its
// timestamp and the body, and the timestamp is within tolerance of now
// (either way). It is short enough to copy into a receiver.
func Verify(secret []byte, header string, body []byte, now time.Time, tolerance time.Duration) error {
	var (
		ts   string
		sigs [][]byte
	)
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrBadHeader
		}
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadHeader
	}
	want := mac(secret, ts, body)
	matched := false
	for _, sig := range sigs {
		matched = matched || hmac.Equal(sig, want)
	}
	if !matched {
		return ErrSignature
	}
	if age := now.Sub(time.Unix(sec, 0)); age > tolerance || age < -tolerance {
		return fmt.Errorf("%w: signed %s ago", ErrTimestamp, age.Round(time.Second))
	}
	return nil
}
