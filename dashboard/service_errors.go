package dashboard

import (
	"errors"
	"net/http"

	"github.com/tollgate/tollgate/oaierror"
)

// serviceFieldErrors turns the management service's refusal of bad input
// (checked again there, with the same rules as the form's) into the form's
// field errors; nil for any other outcome. The form checks first, so this
// is seen only when something changed in between (the account's plan).
func serviceFieldErrors(err error) fieldErrors {
	var oe oaierror.Error
	if !errors.As(err, &oe) || oe.Status != http.StatusBadRequest {
		return nil
	}
	return fieldErrors{oe.Param: oe.Message}
}
