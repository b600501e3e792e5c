package alerts_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/alerts"
	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/store"
)

// addressLike matches what last_error must never hold: an IPv4 or IPv6
// address, or a port.
var addressLike = regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|\[?[0-9a-fA-F]*:[0-9a-fA-F:]+\]?|:\d+`)

// resolvers are the name servers of this machine's resolver configuration.
func resolvers(t *testing.T) []string {
	b, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			out = append(out, f[1])
		}
	}
	return out
}

func TestAFailedDeliveryTellsItsReasonInWordsAndTheOperatorItsError(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedAddr := closed.Addr().String()
	require.NoError(t, closed.Close())
	_, hangingSrv := newHanging(t)
	failing := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	t.Cleanup(failing.Close)
	plain := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(plain.Close)

	tests := []struct {
		name, url string
		trusted   bool // the client trusts the test servers' certificate
		private   bool // the client may reach private addresses
		want      string
		logged    string // in the operator's log
	}{
		{"a closed port", "https://" + closedAddr + "/hook", true, true, alerts.ReasonRefused, closedAddr},
		{"a server that never answers", hangingSrv.URL + "/hook", true, true, alerts.ReasonTimeout, "Client.Timeout"},
		{"a self-signed certificate", failing.URL + "/hook", false, true, alerts.ReasonCertificate, "certificate"},
		{"plain HTTP on an https URL", strings.Replace(plain.URL, "http:", "https:", 1) + "/hook", true, true, alerts.ReasonTLS, "HTTP response to HTTPS client"},
		{"a name that does not resolve", "https://tollgate-test.invalid/hook", true, true, alerts.ReasonDNS, "tollgate-test.invalid"},
		{"a private address", failing.URL + "/hook", true, false, alerts.ReasonPrivate, "127.0.0.1"},
		{"an answer of 500", failing.URL + "/hook", true, true, "HTTP 500", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newWorkerEnv(t, 204)
			_, ep, _ := e.addEndpoint(t, "other@example.com", tt.url)
			_, err := e.st.SetWebhookEnabled(t.Context(), e.endpoint.ID, false)
			require.NoError(t, err)
			o := alerts.ClientOptions{AllowPrivate: func() bool { return tt.private }}
			if tt.trusted {
				o.RootCAs = e.pool
			}
			client := alerts.NewClient(o)
			if tt.name == "a server that never answers" {
				client.Timeout = 200 * time.Millisecond
			}
			var log testenv.Buffer
			w := e.newWorker(client, slog.New(slog.NewTextHandler(&log, nil)))
			_, _, err = e.st.EnqueueAlert(t.Context(), store.AlertEvent{AccountID: ep.AccountID, Kind: store.AlertBalanceLow, DedupeKey: "k"}, "")
			require.NoError(t, err)
			n, err := w.RunOnce(t.Context())
			require.NoError(t, err)
			require.Equal(t, 1, n)

			ds, err := e.st.WebhookDeliveries(t.Context(), ep.ID, 1)
			require.NoError(t, err)
			require.Len(t, ds, 1)
			got := ds[0].LastError
			require.Equal(t, tt.want, got)
			require.NotRegexp(t, addressLike, got)
			for _, ns := range resolvers(t) {
				require.NotContains(t, got, ns)
			}
			require.Contains(t, log.String(), "reason=\""+tt.want+"\"")
			require.Contains(t, log.String(), tt.logged, "the operator's log holds the error itself")
		})
	}
}

func TestSendErrorsWithoutATestServerAreNamedToo(t *testing.T) {
	dial := func(errno syscall.Errno) error {
		return &url.Error{Op: "Post", URL: "https://hooks.example.com/x?token=t", Err: &net.OpError{Op: "dial", Net: "tcp",
			Addr: &net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 8443}, Err: os.NewSyscallError("connect", errno)}}
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{dial(syscall.EHOSTUNREACH), alerts.ReasonUnreachable},
		{dial(syscall.ENETUNREACH), alerts.ReasonUnreachable},
		{dial(syscall.ECONNRESET), alerts.ReasonReset},
		{dial(syscall.ECONNREFUSED), alerts.ReasonRefused},
		{&url.Error{Op: "Post", URL: "https://h.example", Err: io.EOF}, alerts.ReasonClosed},
		{&url.Error{Op: "Post", URL: "https://h.example", Err: context.DeadlineExceeded}, alerts.ReasonTimeout},
		{&net.DNSError{Err: "no such host", Name: "h.example", Server: "10.255.255.53:53", IsNotFound: true}, alerts.ReasonDNS},
		{&net.DNSError{Err: "i/o timeout", Name: "h.example", Server: "10.255.255.53:53", IsTimeout: true}, alerts.ReasonDNS},
		{errors.New("something else at 203.0.113.7:8443"), alerts.ReasonFailed},
	} {
		t.Run(tt.want+"/"+tt.err.Error(), func(t *testing.T) {
			got := alerts.Reason(tt.err)
			require.Equal(t, tt.want, got)
			require.NotRegexp(t, addressLike, got)
		})
	}
}
