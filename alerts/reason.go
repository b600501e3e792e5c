package alerts

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Reasons a delivery failed, in the words its account holder reads in the
// delivery log (last_error): a small fixed vocabulary, so that the log
// never shows an address, a port or the resolver Tollgate asked (which
// would let an account holder map Tollgate's network). The error itself
// goes to the operator's log.
const (
	ReasonRefused     = "connection refused"
	ReasonReset       = "connection reset"
	ReasonClosed      = "connection closed before an answer"
	ReasonUnreachable = "host unreachable"
	ReasonTimeout     = "timed out"
	ReasonDNS         = "DNS lookup failed"
	ReasonTLS         = "TLS error"
	ReasonCertificate = "TLS error: certificate not trusted"
	ReasonPrivate     = "refused: private address"
	ReasonSecret      = "signing secret unavailable"
	ReasonURL         = "invalid URL"
	ReasonFailed      = "request failed"
)

// Errors of send that are not the network's.
var (
	errSecret = errors.New("the endpoint's secret cannot be opened (was the alerts key changed?)")
	errURL    = errors.New("the endpoint's URL cannot be requested")
)

// plainHTTP is net/http's error (a string) for a server that answers an
// https:// request in plain HTTP.
const plainHTTP = "server gave HTTP response to HTTPS client"

// StatusReason is the reason for an answer other than 2xx: "HTTP 503".
func StatusReason(code int) string {
	s := "HTTP " + strconv.Itoa(code)
	if code >= 300 && code <= 399 {
		s += " (redirects are not followed)"
	}
	return s
}

// Reason is err, an error of sending a delivery, in the words of the
// vocabulary above (ReasonFailed for what it does not name).
func Reason(err error) string {
	var (
		dnsErr   *net.DNSError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		record   tls.RecordHeaderError
		alert    tls.AlertError
		netErr   net.Error
	)
	switch {
	case err == nil:
		return ""
	case errors.Is(err, errSecret):
		return ReasonSecret
	case errors.Is(err, errURL):
		return ReasonURL
	case errors.Is(err, ErrPrivateAddress):
		return ReasonPrivate
	case errors.As(err, &dnsErr):
		return ReasonDNS
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return ReasonCertificate
	case errors.As(err, &record), errors.As(err, &alert), strings.Contains(err.Error(), plainHTTP):
		return ReasonTLS
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded),
		errors.As(err, &netErr) && netErr.Timeout():
		return ReasonTimeout
	case errors.Is(err, syscall.ECONNREFUSED):
		return ReasonRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return ReasonReset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return ReasonUnreachable
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return ReasonClosed
	}
	return ReasonFailed
}
