package dashboard

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// serviceFieldErrors turns the management service's refusal of bad input
// (checked again there, with the same rules as the form's) into the form's
// field errors; nil for any other outcome. The form checks first, so this
// is seen only when something changed in between (the account's plan).
//
// The account's cap on keys (manage.ErrKeyLimit) is no field's: it comes
// back under "", a sentence above the form.
func (d *Dashboard) serviceFieldErrors(err error) fieldErrors {
	var oe oaierror.Error
	switch {
	case !errors.As(err, &oe):
		return nil
	case oe.Code == manage.ErrKeyLimit.Code:
		return fieldErrors{"": fmt.Sprintf("This account has %d keys, the most it may have. Delete a key it no longer needs, then create this one.",
			d.config().Limits.KeysPerAccount)}
	case oe.Status == http.StatusBadRequest:
		return fieldErrors{oe.Param: oe.Message}
	}
	return nil
}

// tokenLimitSentence is the tokens page's answer to manage.ErrTokenLimit.
func (d *Dashboard) tokenLimitSentence() string {
	return fmt.Sprintf("This account has %d management tokens, the most it may have. Revoke one it no longer needs, then create this one.",
		d.config().Limits.TokensPerAccount)
}
