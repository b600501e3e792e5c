package alerts

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Client limits.
const (
	// Timeout bounds one delivery: dial, TLS, request and answer.
	Timeout = 10 * time.Second
	// DialTimeout bounds the connection.
	DialTimeout = 5 * time.Second
	// MaxResponseBytes of an answer are read (then it is dropped).
	MaxResponseBytes = 4 << 10
	// MaxURLLength bounds an endpoint's URL.
	MaxURLLength = 2048
)

// ErrPrivateAddress refuses an address that is not a public unicast one.
var ErrPrivateAddress = errors.New("alerts: private, loopback, link-local or otherwise non-public address refused")

// nonPublic are the ranges refused besides what netip's predicates name:
// CGNAT, "this network", IETF protocol assignments, benchmarking,
// reserved, and NAT64 (which would reach an IPv4 address by the back door).
var nonPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
}

// Private reports whether ip is one a webhook may not reach without the
// operator's leave: private, loopback, link-local, unspecified, multicast,
// CGNAT or otherwise not public unicast.
func Private(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || !ip.IsGlobalUnicast() || ip.IsPrivate() || ip.IsLoopback() ||
		ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ClientOptions configure NewClient.
type ClientOptions struct {
	// AllowPrivate, when it returns true, lets the client reach private
	// and loopback addresses (alerts.allow_private_addresses; tests and
	// development). It is asked at every dial.
	AllowPrivate func() bool
	// RootCAs are the authorities trusted for endpoints; nil means the
	// system's.
	RootCAs *x509.CertPool
}

// NewClient is the webhook client: at most Timeout per delivery, no
// proxy, no redirects followed (a 3xx is the answer), and, unless
// AllowPrivate, no connection to a non-public address: the check is made
// on the address dialled, after resolution, so a name that resolves (or
// rebinds) to one is refused too.
func NewClient(o ClientOptions) *http.Client {
	allow := o.AllowPrivate
	if allow == nil {
		allow = func() bool { return false }
	}
	d := &net.Dialer{Timeout: DialTimeout, Control: func(_, address string, _ syscall.RawConn) error {
		return checkDial(address, allow())
	}}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            d.DialContext,
		TLSClientConfig:        &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    DialTimeout,
		ResponseHeaderTimeout:  Timeout,
		MaxResponseHeaderBytes: 16 << 10,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        time.Minute,
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport: tr,
		Timeout:   Timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}

// checkDial refuses a non-public address unless allowed.
func checkDial(address string, allowPrivate bool) error {
	if allowPrivate {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, address)
	}
	if Private(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrPrivateAddress, ap.Addr())
	}
	return nil
}

// CheckURL says what is wrong with an endpoint URL, at configuration
// time: it must be https (http only when private addresses are allowed),
// have a host, no user and password, and, unless private addresses are
// allowed, not name a private address or localhost literally. A name is
// resolved only when a delivery dials it (see NewClient).
func CheckURL(raw string, allowPrivate bool) error {
	if len(raw) > MaxURLLength {
		return fmt.Errorf("the URL is longer than %d characters", MaxURLLength)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Opaque != "" {
		return errors.New("the URL must be an absolute https:// URL")
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && allowPrivate:
	default:
		return errors.New("the URL must use https")
	}
	if u.User != nil {
		return errors.New("the URL must not hold a user or password")
	}
	if u.Fragment != "" {
		return errors.New("the URL must not have a fragment")
	}
	if allowPrivate {
		return nil
	}
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return errors.New("the URL points to localhost; webhooks reach public addresses only")
	}
	if ip, err := netip.ParseAddr(host); err == nil && Private(ip) {
		return errors.New("the URL points to a private, loopback or link-local address; webhooks reach public addresses only")
	}
	return nil
}
