package edge

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/envoy/contract"
)

func TestTheCheckRequestIsEnvoysForTheRequest(t *testing.T) {
	r := httptest.NewRequest(http.MethodPost, "http://gw.example/v1/chat/completions?x=1", nil)
	r.RemoteAddr = "192.0.2.7:4242"
	h := headers{":path": r.URL.RequestURI(), contract.HeaderRequestID: "req-1", "authorization": "Bearer k"}
	c := (&Edge{}).checkRequest(r, h)
	sock := c.GetAttributes().GetSource().GetAddress().GetSocketAddress()
	assert.Equal(t, "192.0.2.7", sock.GetAddress())
	assert.Equal(t, uint32(4242), sock.GetPortValue())
	http := c.GetAttributes().GetRequest().GetHttp()
	assert.Equal(t, "req-1", http.GetId())
	assert.Equal(t, "POST", http.GetMethod())
	assert.Equal(t, "/v1/chat/completions?x=1", http.GetPath())
	assert.Equal(t, "gw.example", http.GetHost())
	assert.Equal(t, "http", http.GetScheme())
	assert.Equal(t, "HTTP/1.1", http.GetProtocol())
	assert.Equal(t, "Bearer k", http.GetHeaders()["authorization"])
	assert.Equal(t, "192.0.2.7", http.GetHeaders()[contract.HeaderClientAddress], "the caller's address, as Envoy's listener sets it")
}
