package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/tidwall/gjson"
)

// pathSite is a running tollgate serve with one account, one key, one
// admin token and one signed-in dashboard session, and the addresses of
// its two listeners: the main one (the edge's /v1, /api/v1 and the
// dashboard) and the admin one.
type pathSite struct {
	tg          *tollgate
	main, admin string
	accountID   string
	key, token  string
}

func startPathSite(t testing.TB) *pathSite {
	t.Helper()
	tg := startTollgate(t, configFor("http://127.0.0.1:1"), "")
	run := func(args ...string) string {
		out, err := tg.tryRun(args...)
		require.NoError(t, err, out)
		return strings.TrimSpace(out)
	}
	s := &pathSite{tg: tg, main: strings.TrimPrefix(strings.TrimSuffix(tg.BaseURL, "/v1"), "http://")}
	m := adminAddrRE.FindStringSubmatch(tg.logs.String())
	require.NotNil(t, m, "no admin address in the logs")
	s.admin = m[1]
	run("account", "create", "--email", "paths@example.com", "--plan", "pro", "--balance", "10")
	s.accountID = gjson.Get(run("account", "show", "--email", "paths@example.com", "--json"), "id").String()
	s.key = run("key", "create", "--account", "paths@example.com", "--description", "paths")
	s.token = run("token", "create", "--admin")
	return s
}

// rawGet sends one GET with exactly this request target and Host (no
// client-side cleaning, no redirects followed) and returns the status and
// at most 1 MiB of the body.
func rawGet(addr, target, host string, header ...string) (int, string, error) {
	resp, body, err := rawExchange(addr, target, host, header...)
	if resp == nil {
		return 0, "", err
	}
	return resp.StatusCode, body, err
}

// rawExchange is rawGet with the whole response (its body already read
// and closed); the response is nil when none came.
func rawExchange(addr, target, host string, header ...string) (*http.Response, string, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, "", err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return nil, "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n", target, host)
	for i := 0; i+1 < len(header); i += 2 {
		fmt.Fprintf(&b, "%s: %s\r\n", header[i], header[i+1])
	}
	b.WriteString("\r\n")
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return nil, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp, string(body), err
}

// leaks are what only a credential may see: a listing of the management
// API or of the edge's /v1/models (compact JSON; the OpenAPI document is
// indented), an account, a key's hint, a model the key may use, the
// signed-in dashboard's sign-out form, the account's email.
var leaks = []string{`"object":"list"`, `"object":"account"`, "tg_sk_…", `"gpt-4o-mini"`, `action="/logout"`, "paths@example.com"}

// protectedTargets are clean paths that answer only with a credential.
func (s *pathSite) protectedTargets() []string {
	return []string{"/v1/models", "/api/v1/accounts/" + s.accountID, "/api/v1/keys?account_id=" + s.accountID,
		"/api/v1/tokens", "/api/v1/accounts/" + s.accountID + "/members", "/keys", "/tokens", "/usage", "/usage.csv", "/activity", "/members"}
}

// mutations are the forms of a clean path that a parser might route
// differently from the one it checks.
var mutations = []func(string) string{
	func(p string) string { return p },
	func(p string) string { return "/" + p },                               // //api/v1/…
	func(p string) string { return strings.Replace(p, "/", "//", 2) },      // /api//v1/…
	func(p string) string { return strings.ReplaceAll(p[1:], "/", "%2F") }, // api%2Fv1… (no leading slash)
	func(p string) string { return "/" + strings.ReplaceAll(p[1:], "/", "%2F") },
	func(p string) string { return "/" + strings.ReplaceAll(p[1:], "/", "%2f") },
	func(p string) string { return p + ";x" },
	func(p string) string { return strings.Replace(p, "/", "/;/", 2) },
	func(p string) string { return "/x/.." + p },
	func(p string) string { return "/login/.." + p },
	func(p string) string { return "/api/v1/openapi.json/../.." + p },
	func(p string) string { return "/keys/..%2F.." + p },
	func(p string) string { return "/x/%2e%2e" + p },
	func(p string) string { return "/x/.%2E" + p },
	func(p string) string { return "/%2e" + p },
	func(p string) string { return strings.ReplaceAll(p, "/", "\\") },
	func(p string) string { return "/" + strings.ReplaceAll(p[1:], "/", "\\") },
	func(p string) string { return strings.ToUpper(p) },
	func(p string) string { return p + "/" },
	func(p string) string { return p + "%00" },
	func(p string) string { return p + "%20" },
	func(p string) string { return p + "/." },
	func(p string) string { return "http://localhost" + p },
}

// hosts are Host headers that a router might match differently.
func (s *pathSite) hosts() []string {
	return []string{s.main, "localhost", "localhost.", "127.0.0.1.", "LOCALHOST", "evil.example", "[::1]", "", strings.Repeat("a", 4000) + ".example"}
}

// checkNoLeak sends one credential-less GET and fails t when it reaches a
// server error or shows what only a credential may see.
func (s *pathSite) checkNoLeak(t *testing.T, addr, target, host string) {
	t.Helper()
	status, body, err := rawGet(addr, target, host)
	if err != nil && !strings.HasPrefix(target, "/") && !strings.HasPrefix(target, "http://") && closedUnanswered(err) {
		// Not a request target at all: the server refuses the request
		// line (Envoy with an OpenAI-shaped 400, see
		// TestARequestTargetThatIsNoPathGetsA400) and closes. The
		// built-in edge closes before it has read the rest (a long
		// Host), so its 400 may be lost to the reset. Nothing was served.
		return
	}
	if err != nil {
		t.Errorf("GET %q (Host %.40q) on %s: %v", target, host, addr, err)
		return
	}
	if status >= 500 {
		t.Errorf("GET %q (Host %.40q) on %s: %d: %.300s", target, host, addr, status, body)
	}
	if addr == s.main && status >= 400 && onTheAPI(target) && !gjson.Get(body, "error.code").Exists() {
		// Whoever refuses it, Tollgate or Envoy itself (a path it
		// cannot normalize), answers in OpenAI's error shape.
		t.Errorf("GET %q (Host %.40q) on %s: %d is not an OpenAI-shaped error: %.300s", target, host, addr, status, body)
	}
	for _, l := range leaks {
		// A marker the request itself carries may come back in an echo
		// of it (a 404's message, a redirect's link).
		if strings.Contains(body, l) && !strings.Contains(strings.ToLower(target+host), strings.ToLower(l)) {
			t.Errorf("GET %q (Host %.40q) on %s: %d without a credential shows %q: %.300s", target, host, addr, status, l, body)
		}
	}
}

// TestNoPathOrHostFormReachesWithoutACredential sends every protected
// path of every listener in every mutated form (doubled and encoded
// slashes, ';', '..' plain and encoded, backslashes, case, NUL, absolute
// form) with every odd Host (trailing dot, very long, empty, another
// site's) and no credential: nothing answers 5xx and nothing shows what
// the clean path shows only with one. The same clean paths with their
// credentials do show it, so the oracle can fail.
func TestNoPathOrHostFormReachesWithoutACredential(t *testing.T) {
	t.Parallel()
	s := startPathSite(t)
	creds := map[string][]string{
		"/v1/models": {"Authorization", "Bearer " + s.key},
		"/api/v1/":   {"Authorization", "Bearer " + s.token},
	}
	for _, target := range s.protectedTargets()[:3] {
		var h []string
		for prefix, c := range creds {
			if strings.HasPrefix(target, prefix) {
				h = c
			}
		}
		status, body, err := rawGet(s.main, target, s.main, h...)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, "%s with its credential: %s", target, body)
		require.True(t, containsAny(body, leaks), "%s with its credential shows a marker: %.300s", target, body)
	}
	// Some refusals take a second (see checkNoLeak): the requests go
	// thirty-two at a time.
	jobs := make(chan [3]string)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				s.checkNoLeak(t, j[0], j[1], j[2])
			}
		}()
	}
	for _, target := range s.protectedTargets() {
		for _, mutate := range mutations {
			for _, host := range s.hosts() {
				for _, addr := range []string{s.main, s.admin} {
					jobs <- [3]string{addr, mutate(target), host}
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
}

// TestARequestTargetThatIsNoPathGetsA400: a request line whose target is
// not a path (no leading slash, "*") is refused with a 400. Behind Envoy,
// whose HTTP/1 codec refuses it, the 400 is OpenAI's error shape (a local
// reply mapper's) and carries no internal header: the router step, which
// would hold the reply until the connection the codec error closes is gone,
// skips it. Go's HTTP server (the built-in edge) writes its own plain-text
// 400 before any handler sees the request.
func TestARequestTargetThatIsNoPathGetsA400(t *testing.T) {
	t.Parallel()
	s := startPathSite(t)
	for _, target := range []string{"v1/models", "v1/chat/completions", "*", "models?x=1", "%2Fv1%2Fmodels"} {
		resp, body, err := rawExchange(s.main, target, s.main)
		require.NoError(t, err, "GET %q: the connection closed without an answer", target)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "GET %q: %s", target, body)
		if binding() != bindingEnvoy {
			continue
		}
		require.Equal(t, "invalid_request", gjson.Get(body, "error.code").String(), "GET %q: %s", target, body)
		require.Equal(t, "invalid_request_error", gjson.Get(body, "error.type").String())
		require.Empty(t, resp.Header.Get("X-Tollgate-Codec-Refusal"), "GET %q: the router step's skip mark stays inside", target)
	}
}

// closedUnanswered tells whether a request's connection was closed (reset
// or ended) before any answer came.
func closedUnanswered(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)
}

// onTheAPI tells whether a target is a path of /v1 or /api/v1 with no dot
// segment (which a proxy may resolve to a path off the API).
func onTheAPI(target string) bool {
	return (strings.HasPrefix(target, "/v1/") || strings.HasPrefix(target, "/api/v1/")) &&
		!strings.Contains(target, "..") && !strings.Contains(strings.ToLower(target), "%2e")
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// FuzzPathsAndHostsRevealNothingWithoutACredential is the table above
// opened to the fuzzer: any request target and Host, no credential, on
// both listeners. Its seed corpus is the table's own inputs.
func FuzzPathsAndHostsRevealNothingWithoutACredential(f *testing.F) {
	s := startPathSite(f)
	for _, target := range s.protectedTargets() {
		for _, mutate := range mutations {
			f.Add(mutate(target), "localhost.")
		}
	}
	f.Add("/api/v1//accounts/"+s.accountID, strings.Repeat("h", 8000))
	f.Fuzz(func(t *testing.T, target, host string) {
		if target == "" || strings.ContainsAny(target+host, " \r\n\t\x00") || len(target) > 8<<10 || len(host) > 16<<10 {
			return // not a request line or header the client could send
		}
		// Some refusals take a second (see checkNoLeak); the seeds run
		// side by side (fuzzing itself ignores this).
		t.Parallel()
		for _, addr := range []string{s.main, s.admin} {
			s.checkNoLeak(t, addr, target, host)
		}
	})
}
