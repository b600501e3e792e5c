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
	return &authv3.CheckRequest{Attributes: &authv3.AttributeContext{
		Source: &authv3.AttributeContext_Peer{Address: &corev3.Address{Address: &corev3.Address_SocketAddress{
			SocketAddress: &corev3.SocketAddress{Address: ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: port}},
		}}},
		Request: &authv3.AttributeContext_Request{Http: &authv3.AttributeContext_HttpRequest{
			Id: h[contract.HeaderRequestID], Method: r.Method, Path: r.URL.RequestURI(), Host: r.Host,
			Scheme: "http", Protocol: r.Proto, Headers: hm,
		}},
	}}
}

// sourceAddress is the caller's address as Envoy computes it with
// use_remote_address and xff_num_trusted_hops (package clientaddr).
func (e *Edge) sourceAddress(r *http.Request) (string, uint32) {
	return clientaddr.Of(r, e.opt.XFFTrustedHops)
}
