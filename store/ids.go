package store

import (
	"fmt"
	"io"
)

// ID prefixes say what an ID names.
const (
	accountIDPrefix = "acct_"
	keyIDPrefix     = "key_"
)

// idRandomLen is the number of base62 characters after an ID's prefix
// (about 95 bits).
const idRandomLen = 16

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// newID returns prefix followed by idRandomLen base62 characters drawn from r
// without bias: bytes of 248 and above (4·62) are thrown away.
func newID(r io.Reader, prefix string) (string, error) {
	out := make([]byte, 0, len(prefix)+idRandomLen)
	out = append(out, prefix...)
	var buf [2 * idRandomLen]byte
	for len(out) < cap(out) {
		if _, err := io.ReadFull(r, buf[:]); err != nil {
			return "", fmt.Errorf("new id: %w", err)
		}
		for _, b := range buf {
			if b >= 4*62 {
				continue
			}
			out = append(out, base62[b%62])
			if len(out) == cap(out) {
				break
			}
		}
	}
	return string(out), nil
}
