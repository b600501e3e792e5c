package extproc

import (
	"context"
	"errors"

	"github.com/tollgate/tollgate/envoy/contract"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// authenticate sets the request's identity from ext_authz's signed
// decision (contract.HeaderDecision): valid under the step key, not
// expired, and made for this request's x-request-id. The plain key and
// account headers are not trusted: any caller of the gRPC port can set
// them. The key must then be the account's, enabled and not expired, as
// the key cache knows it now.
//
// A request without a valid decision was not admitted by ext_authz: a
// forged call, or a proxy whose ext_authz is missing or holds another key.
// It gets a 500 (the client can do nothing about it) and an error log
// line; a key disabled, expired or deleted since ext_authz admitted it gets
// ext_authz's own 401. Neither is recorded: no identity is trusted.
// Without a step key (tests of one step alone) the plain headers are taken.
func (r *routerStep) authenticate(ctx context.Context, hm map[string]string) *oaierror.Error {
	log := r.s.opt.Logger
	keyID, accountID := hm[contract.HeaderKeyID], hm[contract.HeaderAccountID]
	if !r.s.decisions.IsZero() {
		d, err := r.s.decisions.Verify(hm[contract.HeaderDecision], r.started)
		if err == nil && (d.RequestID == "" || d.RequestID != r.clientRequestID) {
			err = errOtherRequest
		}
		if err != nil {
			// The reason names no part of the value.
			log.ErrorContext(ctx, "router step: no valid ext_authz decision; refused (is ext_authz, sharing this step key, configured before ext_proc?)",
				"reason", err.Error(), "request_id", r.clientRequestID)
			return copyError(oaierror.Internal)
		}
		keyID, accountID = d.KeyID, d.AccountID
	} else if keyID == "" || accountID == "" {
		log.ErrorContext(ctx, "router step: request without identity headers; is ext_authz configured before ext_proc?")
		return copyError(oaierror.Internal)
	}
	key, err := r.s.opt.Keys.KeyByID(ctx, keyID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return copyError(oaierror.InvalidAPIKey)
	case err != nil:
		log.ErrorContext(ctx, "router step: key lookup failed", "key_id", keyID, "err", err)
		return copyError(r.failed(err))
	case key.AccountID != accountID:
		log.ErrorContext(ctx, "router step: the admitted key is not the account's; refused", "key_id", keyID, "account_id", accountID)
		return copyError(oaierror.Internal)
	case !key.Enabled:
		return copyError(oaierror.KeyDisabled)
	case key.Expired(r.started):
		return copyError(oaierror.KeyExpired)
	}
	r.keyID, r.accountID, r.key = keyID, accountID, key
	return nil
}

// copyError is a copy of a shared error value, for the caller to keep.
func copyError(e oaierror.Error) *oaierror.Error { return &e }

// errOtherRequest: a decision ext_authz made for another request id.
var errOtherRequest = errors.New("decision made for another request")
