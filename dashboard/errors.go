package dashboard

import (
	"errors"
	"net/http"

	"github.com/tollgate/tollgate/manage"
	"github.com/tollgate/tollgate/oaierror"
)

// pageError is an error whose status and message may be shown to the
// visitor. The service's manage.ErrNotFound (no such resource, or not the
// visitor's), wrapped or not, is shown as errNotFound, and its 400s (the
// visitor's doing) with the service's message. Any other error a
// handler returns is logged and shown as a generic 500 page, so a cause
// never reaches the browser.
type pageError struct {
	status  int
	title   string
	message string
}

func (e *pageError) Error() string { return e.title }

var (
	errNotFound = &pageError{
		status:  http.StatusNotFound,
		title:   "Not found",
		message: "There is no such page here.",
	}
	errForbidden = &pageError{
		status:  http.StatusForbidden,
		title:   "Request refused",
		message: "This request could not be verified, so nothing was changed. Go back, reload the page and try again.",
	}
	errBadRequest = &pageError{
		status:  http.StatusBadRequest,
		title:   "Bad request",
		message: "The form could not be read. Go back, reload the page and try again.",
	}
	errNotAllowed = &pageError{
		status:  http.StatusForbidden,
		title:   "Not allowed",
		message: "Your role in this account does not allow this. An owner or an admin of the account can change your role.",
	}
	errInternal = &pageError{
		status:  http.StatusInternalServerError,
		title:   "Something went wrong",
		message: "The page could not be shown because of an error on our side. Please try again in a moment.",
	}
)

// errorPage is what the error template shows.
type errorPage struct {
	Title   string
	Message string
}

// renderError answers with err's page (see pageError); an error that has
// none is logged with the request and answered with the generic 500 page.
func (d *Dashboard) renderError(w http.ResponseWriter, r *http.Request, err error) {
	d.renderErrorIn(w, r, nil, err)
}

// renderErrorIn is renderError for a signed-in visitor (s nil for none):
// the page keeps the navigation.
func (d *Dashboard) renderErrorIn(w http.ResponseWriter, r *http.Request, s *session, err error) {
	var (
		pe *pageError
		oe oaierror.Error
	)
	switch {
	case errors.As(err, &pe):
	case errors.Is(err, manage.ErrNotFound):
		// Deleted meanwhile, or never the visitor's: the answer tells
		// neither apart from an id that never existed.
		pe = errNotFound
	case refusedForRole(err):
		pe = errNotAllowed
	case errors.As(err, &oe) && oe.Status == http.StatusBadRequest:
		// The visitor's doing, which the service explains (an id or a
		// filter the database cannot hold, say); its messages are
		// written for whoever called.
		pe = &pageError{status: http.StatusBadRequest, title: "Bad request", message: oe.Message}
	default:
		d.log.ErrorContext(r.Context(), "dashboard: request failed", "method", r.Method, "path", r.URL.Path, "err", err)
		pe = errInternal
	}
	d.render(w, r, pe.status, "error", s, pe.title, errorPage{Title: pe.title, Message: pe.message})
}

// refusedForRole reports whether err is the service's refusal of what the
// member's role (or scope) does not allow: a 403.
func refusedForRole(err error) bool {
	var oe oaierror.Error
	return errors.As(err, &oe) && oe.Status == http.StatusForbidden
}
