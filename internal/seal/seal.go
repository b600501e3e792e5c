// Package seal encrypts small values for a round trip through somewhere
// untrusted (a cookie, a database row): AES-256-GCM under a key derived for
// one purpose, a random nonce in front of the ciphertext, and optional
// associated data the value is bound to. The dashboard's one-time secrets,
// the management API's stored idempotent answers and the webhook
// endpoints' signing secrets use it.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// ErrShort is Open's answer to input shorter than a nonce.
var ErrShort = errors.New("seal: sealed value too short")

// Key derives the 32-byte key for one purpose from secret:
// HMAC-SHA256(secret, label). Different labels give unrelated keys.
func Key(secret []byte, label string) []byte {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(label))
	return mac.Sum(nil)
}

// Seal encrypts plain under key, bound to data (nil for none), with a
// nonce read from random; the nonce leads the result.
func Seal(key, plain, data []byte, random io.Reader) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := io.ReadFull(random, nonce); err != nil {
		return nil, fmt.Errorf("seal: nonce: %w", err)
	}
	return aead.Seal(nonce, nonce, plain, data), nil
}

// Open decrypts what Seal made under the same key and data; it fails if
// either differs or the value was changed.
func Open(key, sealed, data []byte) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	n := aead.NonceSize()
	if len(sealed) < n {
		return nil, ErrShort
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], data)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return plain, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("seal: %w", err)
	}
	return cipher.NewGCM(block)
}
