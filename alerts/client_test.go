package alerts_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
)

func TestNonPublicAddressesArePrivate(t *testing.T) {
	for _, a := range []string{"127.0.0.1", "::1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254",
		"fe80::1", "0.0.0.0", "::", "224.0.0.1", "ff02::1", "100.64.0.1", "fd00::1", "::ffff:127.0.0.1",
		"::ffff:10.0.0.1", "64:ff9b::a00:1", "198.18.0.1", "255.255.255.255", "0.1.2.3"} {
		require.True(t, alerts.Private(netip.MustParseAddr(a)), a)
	}
	for _, a := range []string{"8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "100.128.0.1", "::ffff:8.8.8.8"} {
		require.False(t, alerts.Private(netip.MustParseAddr(a)), a)
	}
}

func TestAURLIsCheckedAtConfigurationTime(t *testing.T) {
	ok := []string{"https://hooks.example.com/tollgate", "https://8.8.8.8/x", "https://[2606:4700:4700::1111]:8443/"}
	for _, u := range ok {
		require.NoError(t, alerts.CheckURL(u, false), u)
	}
	bad := map[string]string{
		"http://hooks.example.com/":         "https",
		"ftp://hooks.example.com/":          "https",
		"hooks.example.com/x":               "absolute",
		"https://127.0.0.1/":                "private",
		"https://[::1]:8443/":               "private",
		"https://10.0.0.5/":                 "private",
		"https://169.254.169.254/latest":    "private",
		"https://localhost:8443/":           "localhost",
		"https://api.localhost/":            "localhost",
		"https://user:pw@hooks.example.com": "user",
		"https://":                          "absolute",
		"https://h.example.com/" + strings.Repeat("a", alerts.MaxURLLength): "longer",
	}
	for u, want := range bad {
		err := alerts.CheckURL(u, false)
		require.ErrorContains(t, err, want, u)
	}
	require.NoError(t, alerts.CheckURL("http://127.0.0.1:8080/", true), "allowed by the operator")
}

func TestTheClientRefusesPrivateAddressesAtDialTimeUnlessAllowed(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { hits.Add(1) }))
	t.Cleanup(srv.Close)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	// A name that resolves to loopback is refused as well as the literal.
	for _, u := range []string{srv.URL, strings.Replace(srv.URL, "127.0.0.1", "localhost", 1)} {
		c := alerts.NewClient(alerts.ClientOptions{RootCAs: pool})
		_, err := c.Post(u, "application/json", nil)
		require.ErrorIs(t, err, alerts.ErrPrivateAddress, u)
	}
	require.Zero(t, hits.Load())

	allow := alerts.NewClient(alerts.ClientOptions{RootCAs: pool, AllowPrivate: func() bool { return true }})
	resp, err := allow.Post(srv.URL, "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, int32(1), hits.Load())
}

func TestTheClientNeverFollowsARedirect(t *testing.T) {
	var followed atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/hook", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/elsewhere", func(http.ResponseWriter, *http.Request) { followed.Store(true) })
	srv := httptest.NewTLSServer(mux)
	t.Cleanup(srv.Close)
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	c := alerts.NewClient(alerts.ClientOptions{RootCAs: pool, AllowPrivate: func() bool { return true }})
	resp, err := c.Post(srv.URL+"/hook", "application/json", nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusTemporaryRedirect, resp.StatusCode)
	require.False(t, followed.Load())
}
