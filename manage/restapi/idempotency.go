package restapi

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/seal"
	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// Idempotency-Key on every POST: a retried call gets the first call's
// answer (the same key, with the same secret; the same credit) instead of
// acting twice.
//
// The first answer is kept for store.IdempotencyTTL, sealed with AES-GCM
// under a key derived from the caller's token secret and the
// Idempotency-Key: the database holds it, but without the token — which is
// never stored — nobody can read the key secret it may contain.

// MaxIdempotencyKey bounds an Idempotency-Key.
const MaxIdempotencyKey = 255

// idempotencyTakeOver is how long a first call may run before a retry
// presumes it died and runs instead.
const idempotencyTakeOver = time.Minute

var (
	errIdempotencyReused = oaierror.Error{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused", Type: oaierror.TypeInvalidRequest,
		Message: "This Idempotency-Key was used with another request; use a new key for a new request.", Param: "Idempotency-Key"}
	errIdempotencyRunning = oaierror.Error{Status: http.StatusConflict, Code: "idempotency_in_progress", Type: oaierror.TypeInvalidRequest,
		Message: "The first request with this Idempotency-Key is still running; retry in a moment.", Param: "Idempotency-Key"}
)

// sealedAnswer is what is kept of a first answer.
type sealedAnswer struct {
	Status   int               `json:"status"`
	Headers  map[string]string `json:"headers"`
	Body     []byte            `json:"body"`
	Original time.Time         `json:"at"`
}

// recorder keeps what a handler writes, for sealing.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// sealKey is the key a stored answer is sealed under: one only the
// token's holder, retrying with the same Idempotency-Key, can derive.
func sealKey(tokenSecret, idemKey string) []byte {
	return seal.Key([]byte(tokenSecret), "tollgate idempotency\x00"+idemKey)
}

// idempotent runs a POST handler at most once per (token, Idempotency-Key).
func (api *API) idempotent(w http.ResponseWriter, r *http.Request, a manage.Actor, secret string, h handler) error {
	key := r.Header.Get("Idempotency-Key")
	if key == "" || r.Method != http.MethodPost {
		return h(w, r, a)
	}
	if len(key) > MaxIdempotencyKey {
		return oaierror.Invalid("invalid_request", "Idempotency-Key", "Idempotency-Key is longer than 255 characters.")
	}
	hash, err := requestHash(r)
	if err != nil {
		return err
	}
	ctx := r.Context()
	actor := a.String()
	stored, created, err := api.opt.Store.BeginIdempotent(ctx, actor, key, hash, api.opt.Now().Add(-idempotencyTakeOver))
	if err != nil {
		return api.fail(ctx, "idempotency", err)
	}
	sk := sealKey(secret, key)
	if !created {
		switch {
		case !hmac.Equal(stored.RequestHash, hash):
			return errIdempotencyReused
		case stored.Sealed == nil:
			return errIdempotencyRunning
		}
		return api.replay(w, r, sk, stored.Sealed)
	}

	rec := &recorder{header: w.Header()}
	herr := h(rec, r, a)
	if herr != nil || rec.status < 200 || rec.status >= 300 {
		// Nothing was done: a retry may run again.
		if err := api.opt.Store.AbandonIdempotent(ctx, actor, key); err != nil {
			api.opt.Logger.ErrorContext(ctx, "restapi: idempotency entry not abandoned", "err", err)
		}
		if herr != nil {
			return herr
		}
	} else if err := api.keep(r, actor, key, sk, rec); err != nil {
		// The action is done; only its replay is lost. A retry would
		// find the entry running until it is taken over.
		api.opt.Logger.ErrorContext(ctx, "restapi: idempotent answer not kept", "err", err)
	}
	w.WriteHeader(rec.status)
	_, err = w.Write(rec.body.Bytes())
	return err
}

// requestHash reads the request's body (putting it back for the handler)
// and hashes it with the method and path: a retry must hash the same.
func requestHash(r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody+1))
	if err != nil {
		return nil, oaierror.Invalid("invalid_request", "", "The request body could not be read.")
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	sum := sha256.New()
	sum.Write([]byte(r.Method + " " + r.URL.Path + "\n"))
	sum.Write(body)
	return sum.Sum(nil), nil
}

// replay writes the first call's answer, unsealed with sk.
func (api *API) replay(w http.ResponseWriter, r *http.Request, sk, sealed []byte) error {
	plain, err := seal.Open(sk, sealed, nil)
	if err != nil {
		return api.fail(r.Context(), "idempotency: unseal the first answer", err)
	}
	var first sealedAnswer
	if err := json.Unmarshal(plain, &first); err != nil {
		return api.fail(r.Context(), "idempotency: decode the first answer", err)
	}
	for k, v := range first.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Idempotent-Replayed", "true")
	w.WriteHeader(first.Status)
	_, _ = w.Write(first.Body)
	return nil
}

// keep seals a first call's successful answer under sk and stores it for
// the retries.
func (api *API) keep(r *http.Request, actor, key string, sk []byte, rec *recorder) error {
	answer := sealedAnswer{Status: rec.status, Headers: map[string]string{}, Body: rec.body.Bytes(), Original: api.opt.Now()}
	for _, h := range []string{"Content-Type", "ETag", "Location"} {
		if v := rec.header.Get(h); v != "" {
			answer.Headers[h] = v
		}
	}
	plain, err := json.Marshal(answer)
	if err != nil {
		return fmt.Errorf("encode the answer: %w", err)
	}
	sealed, err := seal.Seal(sk, plain, nil, api.opt.Random)
	if err != nil {
		return fmt.Errorf("seal the answer: %w", err)
	}
	return api.opt.Store.FinishIdempotent(r.Context(), actor, key, sealed)
}
