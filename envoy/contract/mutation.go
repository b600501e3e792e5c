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

// setHeaders builds the options in a handful of allocations however many
// headers: the options and the header values live in two arrays, raw
// values in one buffer. Each header is set once per request or answer, so
// this is on every request's path.
func setHeaders(raw bool, pairs []string) []*corev3.HeaderValueOption {
	n := len(pairs) / 2
	var buf []byte
	if raw {
		size := 0
		for i := 1; i < len(pairs); i += 2 {
			size += len(pairs[i])
		}
		buf = make([]byte, 0, size)
	}
	vals := make([]corev3.HeaderValue, n)
	opts := make([]corev3.HeaderValueOption, n)
	out := make([]*corev3.HeaderValueOption, n)
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
