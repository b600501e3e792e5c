package clientaddr

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestTheClientIsTheEntryTrustedHopsFromTheRight(t *testing.T) {
	for _, tt := range []struct {
		name     string
		peer     string
		xff      []string
		hops     int
		wantHost string
		wantPort uint32
	}{
		{name: "no trusted hops: the peer, whatever the header says", peer: "10.0.0.9:4321", xff: []string{"1.2.3.4"}, wantHost: "10.0.0.9", wantPort: 4321},
		{name: "one hop: the entry the proxy appended", peer: "10.0.0.9:4321", xff: []string{"203.0.113.7"}, hops: 1, wantHost: "203.0.113.7"},
		{name: "one hop: a forged entry to the left is ignored", peer: "10.0.0.9:4321", xff: []string{"6.6.6.6, 203.0.113.7"}, hops: 1, wantHost: "203.0.113.7"},
		{name: "two hops across header lines", peer: "10.0.0.9:4321", xff: []string{"6.6.6.6, 203.0.113.7", "10.1.1.1"}, hops: 2, wantHost: "203.0.113.7"},
		{name: "fewer entries than hops: the peer", peer: "10.0.0.9:4321", xff: []string{"203.0.113.7"}, hops: 2, wantHost: "10.0.0.9", wantPort: 4321},
		{name: "no header: the peer", peer: "10.0.0.9:4321", hops: 1, wantHost: "10.0.0.9", wantPort: 4321},
		{name: "not an address: the peer", peer: "10.0.0.9:4321", xff: []string{"unknown"}, hops: 1, wantHost: "10.0.0.9", wantPort: 4321},
		{name: "IPv6, written canonically", peer: "[::1]:80", xff: []string{"2001:DB8::0:1"}, hops: 1, wantHost: "2001:db8::1"},
		{name: "empty entries are skipped", peer: "10.0.0.9:4321", xff: []string{"203.0.113.7, ,"}, hops: 1, wantHost: "203.0.113.7"},
		{name: "a peer without a port", peer: "pipe", wantHost: "pipe"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			for _, v := range tt.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			host, port := Of(r, tt.hops)
			assert.Equal(t, tt.wantHost, host)
			assert.Equal(t, tt.wantPort, port)
			assert.Equal(t, tt.wantHost, Host(r, tt.hops))
		})
	}
}
