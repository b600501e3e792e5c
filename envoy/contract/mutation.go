package contract

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
)

// SetHeaders are header mutations that set each name (pairs: name, value,
// name, value, …) with OVERWRITE_IF_EXISTS_OR_ADD, the values as strings
// (ext_authz's answers).
func SetHeaders(pairs ...string) []*corev3.HeaderValueOption { return setHeaders(false, pairs) }

// SetRawHeaders are SetHeaders with the values as raw bytes (ext_proc's
// answers, as Envoy sends its own headers to ext_proc).
func SetRawHeaders(pairs ...string) []*corev3.HeaderValueOption { return setHeaders(true, pairs) }

// setHeaders builds the options in one allocation for the mutations of
// every request (up to eight headers whose raw values fit smallRaw bytes),
// in four however many headers otherwise: the options and the header
// values live in arrays, raw values in one buffer. Each header is set once
// per request or answer, so this is on every request's path.
func setHeaders(raw bool, pairs []string) []*corev3.HeaderValueOption {
	n := len(pairs) / 2
	size := 0
	if raw {
		for i := 1; i < len(pairs); i += 2 {
			size += len(pairs[i])
		}
	}
	var (
		buf  []byte
		vals []corev3.HeaderValue
		opts []corev3.HeaderValueOption
		out  []*corev3.HeaderValueOption
	)
	switch {
	case n <= 2 && size <= tinyRaw:
		s := new(setOf2)
		buf, vals, opts, out = s.buf[:0], s.vals[:n:n], s.opts[:n:n], s.out[:n:n]
	case n <= 8 && size <= smallRaw:
		s := new(setOf8)
		buf, vals, opts, out = s.buf[:0], s.vals[:n:n], s.opts[:n:n], s.out[:n:n]
	default:
		if raw {
			buf = make([]byte, 0, size)
		}
		vals = make([]corev3.HeaderValue, n)
		opts = make([]corev3.HeaderValueOption, n)
		out = make([]*corev3.HeaderValueOption, n)
	}
	for i := range n {
		vals[i].Key = pairs[2*i]
		if raw {
			start := len(buf)
			buf = append(buf, pairs[2*i+1]...)
			vals[i].RawValue = buf[start:len(buf):len(buf)]
		} else {
			vals[i].Value = pairs[2*i+1]
		}
		opts[i].Header, opts[i].AppendAction = &vals[i], corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		out[i] = &opts[i]
	}
	return out
}

// tinyRaw and smallRaw bound the raw values setOf2 and setOf8 hold: a
// status, a content type, a provider's credential and path fit.
const (
	tinyRaw  = 64
	smallRaw = 512
)

// setOf2 and setOf8 hold the mutations of up to two and up to eight
// headers in one allocation.
type (
	setOf2 struct {
		vals [2]corev3.HeaderValue
		opts [2]corev3.HeaderValueOption
		out  [2]*corev3.HeaderValueOption
		buf  [tinyRaw]byte
	}
	setOf8 struct {
		vals [8]corev3.HeaderValue
		opts [8]corev3.HeaderValueOption
		out  [8]*corev3.HeaderValueOption
		buf  [smallRaw]byte
	}
)
