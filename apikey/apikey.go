// Package apikey makes, recognises and hashes key secrets of the form
// <prefix>_sk_<random>. A secret is shown once; only its SHA-256 is stored.
package apikey

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/big"
	"regexp"
	"strings"
)

// RandomLen is the length of the random part: 32 random bytes in base62.
const RandomLen = 43

const alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// DefaultPrefix is the prefix used when the configuration names none.
const DefaultPrefix = "tg"

var prefixRE = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// ErrMalformed reports a string that cannot be a key secret.
var ErrMalformed = errors.New("malformed key secret")

// ValidPrefix reports whether p may be used as a key prefix.
func ValidPrefix(p string) bool { return prefixRE.MatchString(p) }

// Generate returns a new secret with the given prefix, drawing 32 bytes from r
// (crypto/rand.Reader in production).
func Generate(prefix string, r io.Reader) (string, error) {
	if !ValidPrefix(prefix) {
		return "", fmt.Errorf("key prefix %q must match [a-z0-9]{1,16}", prefix)
	}
	var b [32]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return "", fmt.Errorf("read random bytes: %w", err)
	}
	n := new(big.Int).SetBytes(b[:])
	out := make([]byte, RandomLen)
	base := big.NewInt(62)
	mod := new(big.Int)
	for i := RandomLen - 1; i >= 0; i-- {
		n.DivMod(n, base, mod)
		out[i] = alphabet[mod.Int64()]
	}
	return prefix + "_sk_" + string(out), nil
}

// Hash is the stored form of a secret.
type Hash [sha256.Size]byte

// HashOf hashes a secret. SHA-256 suits 256-bit random secrets: there is
// nothing to brute-force, so a slow password hash would only cost latency.
func HashOf(secret string) Hash { return sha256.Sum256([]byte(secret)) }

// Hint is what a key list shows of a secret: the prefix, "_sk_…" and its
// last four characters.
func Hint(secret string) string {
	if len(secret) < 4 {
		return "…"
	}
	prefix, _, ok := cut(secret)
	if !ok {
		return "…" + secret[len(secret)-4:]
	}
	return prefix + "_sk_…" + secret[len(secret)-4:]
}

// Check reports whether s has the shape of a secret with the given prefix,
// without touching storage: a cheap first filter for garbage.
func Check(prefix, s string) error {
	p, random, ok := cut(s)
	if !ok || p != prefix || !wellFormed(random) {
		return ErrMalformed
	}
	return nil
}

// wellFormed reports whether random is RandomLen base62 characters.
func wellFormed(random string) bool {
	if len(random) != RandomLen {
		return false
	}
	for i := 0; i < len(random); i++ {
		c := random[i]
		if !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z') {
			return false
		}
	}
	return true
}

func cut(s string) (prefix, random string, ok bool) {
	for i := 0; i+4 <= len(s); i++ {
		if s[i:i+4] == "_sk_" {
			return s[:i], s[i+4:], true
		}
	}
	return "", "", false
}

// TokenPrefix begins every management token (the management API's
// credential). It has no "_sk_", so a token never has an API key's shape,
// and no API key has a token's.
const TokenPrefix = "tg_mt_"

// GenerateToken returns a new management token secret: TokenPrefix and
// RandomLen base62 characters from 32 bytes of r.
func GenerateToken(r io.Reader) (string, error) {
	s, err := Generate("t", r)
	if err != nil {
		return "", err
	}
	return TokenPrefix + s[len("t_sk_"):], nil
}

// CheckToken reports whether s has the shape of a management token.
func CheckToken(s string) error {
	random, ok := strings.CutPrefix(s, TokenPrefix)
	if !ok || !wellFormed(random) {
		return ErrMalformed
	}
	return nil
}

// TokenHint is what a token list shows of a token: its prefix and last
// four characters.
func TokenHint(secret string) string {
	if len(secret) < 4 {
		return TokenPrefix + "…"
	}
	return TokenPrefix + "…" + secret[len(secret)-4:]
}
