package edge

import (
	"net/http"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	authv3 "github.com/envoyproxy/go-control-plane/envoy/service/auth/v3"

	"github.com/tollgate/tollgate/clientaddr"
	"github.com/tollgate/tollgate/envoy/contract"
)

// checkRequest is the ext_authz CheckRequest Envoy would send for r.
func (e *Edge) checkRequest(r *http.Request, h headers) *authv3.CheckRequest {
	ip, port := e.sourceAddress(r)
	// The request's own map, not a copy: ext_authz only reads it, and the
	// edge changes it only once Check has returned. The caller's address
	// goes in over whatever the client sent, as Envoy's listener sets it.
	hm := map[string]string(h)
	hm[contract.HeaderClientAddress] = ip
	// Every message of the request in one allocation.
	m := new(checkMsg)
	m.port.PortValue = port
	m.sock = corev3.SocketAddress{Address: ip, PortSpecifier: &m.port}
	m.sockAddr.SocketAddress = &m.sock
	m.addr.Address = &m.sockAddr
	m.peer.Address = &m.addr
	m.http = authv3.AttributeContext_HttpRequest{
		Id: h[contract.HeaderRequestID], Method: r.Method, Path: h[":path"], Host: r.Host,
		Scheme: "http", Protocol: r.Proto, Headers: hm,
	}
	m.req.Http = &m.http
	m.attrs.Source, m.attrs.Request = &m.peer, &m.req
	m.check.Attributes = &m.attrs
	return &m.check
}

// checkMsg is a CheckRequest and everything it points to.
type checkMsg struct {
	check    authv3.CheckRequest
	attrs    authv3.AttributeContext
	peer     authv3.AttributeContext_Peer
	addr     corev3.Address
	sockAddr corev3.Address_SocketAddress
	sock     corev3.SocketAddress
	port     corev3.SocketAddress_PortValue
	req      authv3.AttributeContext_Request
	http     authv3.AttributeContext_HttpRequest
}

// sourceAddress is the caller's address as Envoy computes it with
// use_remote_address and xff_num_trusted_hops (package clientaddr).
func (e *Edge) sourceAddress(r *http.Request) (string, uint32) {
	return clientaddr.Of(r, e.opt.XFFTrustedHops)
}
