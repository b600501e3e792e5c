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

// setHeaders builds the options in one allocation for up to two headers
// whose raw values fit tinyRaw bytes (most answers' mutations) and for up
// to six that fit smallRaw (an admission's identity and decision, a
// request routed straight to its provider), in three otherwise, each of
// the size it needs: the options with their header
// values in one array, their pointers in another, raw values in one
// buffer. Each header is set once per request or answer, so this is on
// every request's path.
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
		both []setOption
		out  []*corev3.HeaderValueOption
	)
	switch {
	case n <= 2 && size <= tinyRaw:
		s := new(setOf2)
		buf, both, out = s.buf[:0], s.both[:n:n], s.out[:n:n]
	case n <= 6 && size <= smallRaw:
		s := new(setOf6)
		buf, both, out = s.buf[:0:size], s.both[:n:n], s.out[:n:n]
	default:
		if raw {
			buf = make([]byte, 0, size)
		}
		both = make([]setOption, n)
		out = make([]*corev3.HeaderValueOption, n)
	}
	for i := range n {
		o := &both[i]
		o.val.Key = pairs[2*i]
		if raw {
			start := len(buf)
			buf = append(buf, pairs[2*i+1]...)
			o.val.RawValue = buf[start:len(buf):len(buf)]
		} else {
			o.val.Value = pairs[2*i+1]
		}
		o.opt.Header, o.opt.AppendAction = &o.val, corev3.HeaderValueOption_OVERWRITE_IF_EXISTS_OR_ADD
		out[i] = &o.opt
	}
	return out
}

// tinyRaw bounds the raw values a setOf2 holds: a status, a content type,
// a cluster's name fit.
const tinyRaw = 64

// smallRaw bounds the raw values a setOf6 holds: a provider's path, host
// and credential fit.
const smallRaw = 512

// setOption is an option and its header value.
type setOption struct {
	opt corev3.HeaderValueOption
	val corev3.HeaderValue
}

// setOf2 holds the mutations of up to two headers in one allocation.
type setOf2 struct {
	both [2]setOption
	out  [2]*corev3.HeaderValueOption
	buf  [tinyRaw]byte
}

// setOf6 holds the mutations of up to six headers in one allocation.
type setOf6 struct {
	both [6]setOption
	out  [6]*corev3.HeaderValueOption
	buf  [smallRaw]byte
}
