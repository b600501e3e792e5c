package dashboard

import (
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/argon2"
)

// Password length limits, in bytes.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 256
)

// argon2Params are the cost of one password hash. The encoded hash records
// them, so they can be raised later without invalidating stored hashes.
type argon2Params struct {
	memory  uint32 // KiB
	time    uint32
	threads uint8
	keyLen  uint32
}

// owaspParams are OWASP's minimum recommendation for argon2id: 19 MiB,
// two passes, one lane.
var owaspParams = argon2Params{memory: 19 * 1024, time: 2, threads: 1, keyLen: 32}

// currentParams are the cost of a new hash: owaspParams (the package's
// tests lower them where the cost is not what they test).
var currentParams = owaspParams

// saltLen is the length of a password's random salt, in bytes.
const saltLen = 16

// Limits on the parameters verifyPassword accepts from a stored hash, so a
// corrupted row cannot make a sign-in allocate without bound.
const (
	maxMemoryKiB = 1 << 20 // 1 GiB
	maxTime      = 16
	maxKeyLen    = 128
)

var errMalformedHash = errors.New("malformed password hash")

// HashPassword returns the encoded argon2id hash of a password, in the PHC
// string format ($argon2id$v=19$m=…,t=…,p=…$salt$hash), with a 16-byte salt
// drawn from random (crypto/rand.Reader in production). The password must be
// 8–256 bytes long.
func HashPassword(password string, random io.Reader) (string, error) {
	switch n := len(password); {
	case n < MinPasswordLen:
		return "", fmt.Errorf("the password is %d bytes long; it must have at least %d", n, MinPasswordLen)
	case n > MaxPasswordLen:
		return "", fmt.Errorf("the password is %d bytes long; it must have at most %d", n, MaxPasswordLen)
	}
	salt := make([]byte, saltLen)
	if _, err := io.ReadFull(random, salt); err != nil {
		return "", fmt.Errorf("read random bytes for a salt: %w", err)
	}
	return encodeHash(currentParams, salt, password), nil
}

func encodeHash(p argon2Params, salt []byte, password string) string {
	key := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, p.keyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// verifyPassword reports whether password matches the encoded hash,
// comparing in constant time. An error means the hash itself is unusable.
func verifyPassword(encoded, password string) (bool, error) {
	p, salt, key, err := decodeHash(encoded)
	if err != nil {
		return false, err
	}
	got := argon2.IDKey([]byte(password), salt, p.time, p.memory, p.threads, p.keyLen)
	return subtle.ConstantTimeCompare(got, key) == 1, nil
}

func decodeHash(encoded string) (p argon2Params, salt, key []byte, err error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" {
		return p, nil, nil, errMalformedHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version || parts[2] != fmt.Sprintf("v=%d", version) {
		return p, nil, nil, fmt.Errorf("%w: unsupported version", errMalformedHash)
	}
	_, err = fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &p.memory, &p.time, &p.threads)
	if err != nil || parts[3] != fmt.Sprintf("m=%d,t=%d,p=%d", p.memory, p.time, p.threads) {
		return p, nil, nil, fmt.Errorf("%w: parameters", errMalformedHash)
	}
	if p.memory < 8 || p.memory > maxMemoryKiB || p.time < 1 || p.time > maxTime || p.threads < 1 {
		return p, nil, nil, fmt.Errorf("%w: parameters out of range", errMalformedHash)
	}
	b64 := base64.RawStdEncoding
	if salt, err = b64.DecodeString(parts[4]); err != nil || len(salt) < 8 {
		return p, nil, nil, fmt.Errorf("%w: salt", errMalformedHash)
	}
	if key, err = b64.DecodeString(parts[5]); err != nil || len(key) < 16 || len(key) > maxKeyLen {
		return p, nil, nil, fmt.Errorf("%w: hash", errMalformedHash)
	}
	p.keyLen = uint32(len(key))
	return p, salt, key, nil
}

// dummyHash is a hash of a password nobody knows, with the current
// parameters. Checking a sign-in for an unknown email against it costs the
// same as checking a real one, so the answer's timing does not tell whether
// the email has an account.
var dummyHash = sync.OnceValue(func() string {
	return encodeHash(currentParams, []byte("tollgate-dummy-salt"), "no password matches this one")
})
