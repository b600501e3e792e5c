// Package keyopts owns the rules of an API key's editable options
// (description, rate limit, token limits, IP restrictions, models,
// expiry): one parser per field, and Create and Update, which check every
// field of a Patch and change nothing unless all of them are valid. The management service,
// the dashboard and the CLI edit keys by these rules.
package keyopts

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tollgate/tollgate/store"
)

// ErrInvalid is wrapped by every validation error of this package, so callers
// can tell bad input (errors.Is(err, ErrInvalid)) from a failure to save.
var ErrInvalid = errors.New("invalid key option")

// Field names, as on the wire.
const (
	FieldDescription    = "description"
	FieldRateLimitRPM   = "rate_limit_rpm"
	FieldIPRestrictions = "ip_restrictions"
	FieldModels         = "models"
	FieldExpiresAt      = "expires_at"
)

// FieldError is a user-facing message about one field.
type FieldError struct {
	Field   string
	Message string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Message }

// Unwrap makes every FieldError match ErrInvalid.
func (e *FieldError) Unwrap() error { return ErrInvalid }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}

// Errors are the FieldErrors of one Patch, in field order, so a form can show
// each beside its field.
type Errors []*FieldError

func (es Errors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return strings.Join(msgs, "; ")
}

// Unwrap exposes the individual errors to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Field returns the message about field, or "" when it is valid.
func (es Errors) Field(field string) string {
	for _, e := range es {
		if e.Field == field {
			return e.Message
		}
	}
	return ""
}

// Patch is a set of changes to a key's options as a person typed them. A nil
// field is left as it is (on Create: takes its default).
type Patch struct {
	// Description is trimmed; 1–200 characters. Required on Create.
	Description *string
	// RateLimit is "off" or a whole number of requests per minute (see
	// ParseRateLimit). Default Off.
	RateLimit *string
	// TPMLimit and TokensPerDay are "off" or a whole number of tokens per
	// minute and per UTC day (see ParseTokenLimit). Default Off.
	TPMLimit, TokensPerDay *string
	// IPRestrictions replaces the list; an empty list removes every
	// restriction (see IPRestrictions). Default none.
	IPRestrictions *[]string
	// Models replaces the allow-list (see Models); a pointer to a nil slice
	// means All Models, the default.
	Models *[]string
	// Expiry is "YYYY-MM-DD" or "never" (see ParseExpiry). Default never.
	Expiry *string
	// Enabled switches the key on or off. Default true.
	Enabled *bool
}

// Rules are the checks that depend on the caller's context.
type Rules struct {
	// Now is the clock Create compares an expiry date with; nil means time.Now.
	Now func() time.Time
	// KnownModel reports whether a model id exists in the configuration; nil
	// accepts any well-formed id.
	KnownModel func(id string) bool
}

func (r Rules) now() time.Time {
	if r.Now == nil {
		return time.Now()
	}
	return r.Now()
}

// Create returns the options of a new key from p: Description is required,
// every other field takes its default when nil. An expiry date that has
// already ended is rejected, since the key would be born expired. The result
// has only the editable options set; the store assigns the rest.
func Create(p Patch, r Rules) (store.Key, error) {
	k := store.Key{IPRestrictions: []string{}, Enabled: true}
	var errs Errors
	if p.Description == nil {
		errs = append(errs, fieldErr(FieldDescription, "is required"))
	}
	k, errs = apply(k, p, r, true, errs)
	if len(errs) > 0 {
		return store.Key{}, errs
	}
	return k, nil
}

// Update returns k with the changes of p applied, or k unchanged and Errors
// naming every invalid field. Fields p leaves nil are not checked again, so a
// key saved under older rules can still be edited. An expiry date already
// past is allowed here: it is how an administrator expires a key at once,
// and a form re-submitting an expired key's date must still save.
func Update(k store.Key, p Patch, r Rules) (store.Key, error) {
	out, errs := apply(k, p, r, false, nil)
	if len(errs) > 0 {
		return k, errs
	}
	return out, nil
}

func apply(k store.Key, p Patch, r Rules, creating bool, errs Errors) (store.Key, Errors) {
	add := func(err error) {
		var fe *FieldError
		if errors.As(err, &fe) {
			errs = append(errs, fe)
		} else {
			errs = append(errs, fieldErr("key", "%v", err))
		}
	}
	if p.Description != nil {
		d, err := Description(*p.Description)
		if err != nil {
			add(err)
		}
		k.Description = d
	}
	if p.RateLimit != nil {
		rpm, err := ParseRateLimit(*p.RateLimit)
		if err != nil {
			add(err)
		}
		k.RateLimitRPM = rpm
	}
	applyTokenLimits(&k, p, add)
	if p.IPRestrictions != nil {
		ips, err := IPRestrictions(*p.IPRestrictions)
		if err != nil {
			add(err)
		}
		k.IPRestrictions = ips
	}
	if p.Models != nil {
		m, err := Models(*p.Models, r.KnownModel)
		if err != nil {
			add(err)
		}
		k.Models = m
	}
	if p.Expiry != nil {
		var (
			exp *time.Time
			err error
		)
		if creating {
			exp, err = ParseExpiry(*p.Expiry, r.now())
		} else {
			exp, err = ParseExpiryDate(*p.Expiry)
		}
		if err != nil {
			add(err)
		}
		k.ExpiresAt = exp
	}
	if p.Enabled != nil {
		k.Enabled = *p.Enabled
	}
	return k, errs
}
