package alerts

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/tollgate/tollgate/internal/seal"
)

// SecretPrefix begins every endpoint's signing secret.
const SecretPrefix = "whsec_"

// NewSecret makes an endpoint's signing secret: SecretPrefix and 32
// random bytes, base64url. The whole string is the HMAC key.
func NewSecret(random io.Reader) (string, error) {
	if random == nil {
		random = rand.Reader
	}
	b := make([]byte, 32)
	if _, err := io.ReadFull(random, b); err != nil {
		return "", fmt.Errorf("alerts: secret: %w", err)
	}
	return SecretPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// SecretKey derives the key endpoints' secrets are sealed under from the
// server's alerts key (alerts.secret_key, or one kept in the database).
func SecretKey(serverKey []byte) []byte {
	return seal.Key(serverKey, "tollgate webhook secret")
}

// SealSecret seals an endpoint's secret under key, bound to its id (a
// sealed secret copied to another endpoint does not open).
func SealSecret(key []byte, endpointID, secret string, random io.Reader) ([]byte, error) {
	if random == nil {
		random = rand.Reader
	}
	return seal.Seal(key, []byte(secret), []byte(endpointID), random)
}

// OpenSecret opens what SealSecret sealed.
func OpenSecret(key []byte, endpointID string, sealed []byte) ([]byte, error) {
	return seal.Open(key, sealed, []byte(endpointID))
}

// SharedSecrets keep the secrets every replica shares (a store.Store).
type SharedSecrets interface {
	SharedSecret(ctx context.Context, name string, candidate []byte) ([]byte, error)
}

// sharedKeyName names the alerts key kept in the database.
const sharedKeyName = "alerts secret key"

// KeyFor is the key endpoints' secrets are sealed under: derived from
// configured (alerts.secret_key) when it is set, else from a random key
// the first replica (or CLI) to ask stores in the database. Serve and the
// CLI derive it alike, so either can seal what the other opens.
func KeyFor(ctx context.Context, st SharedSecrets, configured []byte) ([]byte, error) {
	if len(configured) > 0 {
		return SecretKey(configured), nil
	}
	candidate := make([]byte, 32)
	if _, err := rand.Read(candidate); err != nil {
		return nil, fmt.Errorf("alerts key: %w", err)
	}
	key, err := st.SharedSecret(ctx, sharedKeyName, candidate)
	if err != nil {
		return nil, fmt.Errorf("alerts key: %w", err)
	}
	return SecretKey(key), nil
}
