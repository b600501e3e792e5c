// Package clientaddr finds a request's client address the way Envoy does
// with use_remote_address and xff_num_trusted_hops: the TCP peer, unless
// trusted proxies in front wrote it into X-Forwarded-For. The built-in
// edge (for ext_authz's IP restrictions) and the dashboard (for its
// per-address sign-in limit) both ask it, so the two cannot disagree.
package clientaddr

import (
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Of returns r's client address and port. With trustedHops > 0 it is the
// entry trustedHops from the right of X-Forwarded-For (every header line,
// in order; port 0): each trusted proxy appends the address it received
// the request from, so entries further left are the client's own claims
// and are never believed. With trustedHops 0, fewer entries than that, or
// an entry that is not an IP address, it is the TCP peer.
func Of(r *http.Request, trustedHops int) (string, uint32) {
	host, portStr, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		port = 0
	}
	if trustedHops <= 0 {
		return host, uint32(port)
	}
	chain := forwardedFor(r.Header.Values("X-Forwarded-For"))
	if i := len(chain) - trustedHops; i >= 0 && i < len(chain) {
		if ip := net.ParseIP(chain[i]); ip != nil {
			return ip.String(), 0
		}
	}
	return host, uint32(port)
}

// Host is Of without the port.
func Host(r *http.Request, trustedHops int) string {
	h, _ := Of(r, trustedHops)
	return h
}

// forwardedFor splits X-Forwarded-For's lines into their entries, skipping
// empty ones.
func forwardedFor(lines []string) []string {
	var chain []string
	for _, v := range lines {
		for part := range strings.SplitSeq(v, ",") {
			if p := strings.TrimSpace(part); p != "" {
				chain = append(chain, p)
			}
		}
	}
	return chain
}
