package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/money"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/usagelog"
)

// privatePostgres is a PostgreSQL server of the test's own (Debian's
// initdb and pg_ctl, run as the postgres user when the test runs as root),
// which the test may stop and start; the shared one on 5432 is never
// touched.
type privatePostgres struct {
	t        *testing.T
	bin, dir string
	port     int
}

func startPrivatePostgres(t *testing.T) *privatePostgres {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
	if len(bins) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("no /usr/lib/postgresql/*/bin/pg_ctl and CI is set: install Debian's postgresql (make services)")
		}
		t.Skip("skipping: no Debian PostgreSQL binaries (make services installs them; CI runs this test)")
	}
	sort.Strings(bins)
	dir, err := os.MkdirTemp("", "tollgate-pg-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	p := &privatePostgres{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: dir}
	t.Cleanup(func() {
		_ = p.pgctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		require.NoError(t, exec.Command("chown", "postgres:postgres", dir).Run())
	}
	require.NoError(t, p.as(filepath.Join(p.bin, "initdb"), "-D", p.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.port = l.Addr().(*net.TCPAddr).Port
	l.Close()
	p.start()
	return p
}

func (p *privatePostgres) data() string { return filepath.Join(p.dir, "data") }

// as runs a PostgreSQL program, as the postgres user when this is root.
func (p *privatePostgres) as(prog string, args ...string) error {
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	} else {
		cmd = exec.Command(prog, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %v: %w\n%s", filepath.Base(prog), args, err, out)
	}
	return nil
}

func (p *privatePostgres) pgctl(args ...string) error {
	return p.as(filepath.Join(p.bin, "pg_ctl"), append([]string{"-D", p.data(), "-w", "-t", "30"}, args...)...)
}

func (p *privatePostgres) start() {
	p.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100", p.port, p.dir)
	require.NoError(p.t, p.pgctl("-l", filepath.Join(p.dir, "log"), "-o", opts, "start"))
}

// crash stops the server at once, as a lost machine or a killed process
// does: no checkpoint, the next start replays the WAL.
func (p *privatePostgres) crash() { require.NoError(p.t, p.pgctl("stop", "-m", "immediate")) }

func (p *privatePostgres) url() string {
	return "postgres://postgres@127.0.0.1:" + strconv.Itoa(p.port) + "/postgres?sslmode=disable"
}

// adminAddr finds the admin listener's address in serve's log line (JSON
// or text).
var adminAddr = regexp.MustCompile(`\badmin"?[=:]"?(127\.0\.0\.1:\d+)`)

// readyz asks a replica's /readyz and returns its status code (0: no
// answer).
func (tg *tollgate) readyz() int {
	m := adminAddr.FindStringSubmatch(tg.logs.String())
	if m == nil {
		return 0
	}
	c := http.Client{Timeout: 3 * time.Second}
	resp, err := c.Get("http://" + m[1] + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestTwoReplicasRideOutAPostgreSQLCrash crashes and restarts the database
// of two replicas under load: requests answered meanwhile are all recorded
// (the usage journal keeps what the database could not take, replayed at
// the next start), none is charged twice, the balance is the initial one
// less the recorded costs, and /readyz reports the outage, then recovery.
func TestTwoReplicasRideOutAPostgreSQLCrash(t *testing.T) {
	t.Parallel()
	pg := startPrivatePostgres(t)
	p := newMockOpenAI(t)
	journals := []string{filepath.Join(t.TempDir(), "a.journal"), filepath.Join(t.TempDir(), "b.journal")}
	a := startTollgate(t, configFor(p.URL), pg.url(), "--journal", journals[0])
	b := startTollgate(t, configFor(p.URL), pg.url(), "--journal", journals[1])
	replicas := []*tollgate{a, b}
	secret := a.newAccount(t, "pg@example.com", "10")
	id := a.onlyKeyID(t, "pg@example.com")
	initial := a.balance(t, "pg@example.com")
	require.Equal(t, http.StatusOK, a.readyz())

	stop := make(chan struct{})
	var ok, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			c := http.Client{Timeout: 20 * time.Second}
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodPost, replicas[(i+n)%2].BaseURL+"/chat/completions", strings.NewReader(helloBody))
				req.Header.Set("Authorization", "Bearer "+secret)
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ok.Add(1)
				} else {
					failed.Add(1)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	pg.crash()
	var sawDown [2]bool
	require.Eventually(t, func() bool {
		for i, r := range replicas {
			sawDown[i] = sawDown[i] || r.readyz() == http.StatusServiceUnavailable
		}
		return sawDown[0] && sawDown[1]
	}, 10*time.Second, 100*time.Millisecond, "/readyz did not report the database down")
	time.Sleep(time.Second)
	pg.start()
	require.Eventually(t, func() bool { return a.readyz() == http.StatusOK && b.readyz() == http.StatusOK },
		20*time.Second, 100*time.Millisecond, "/readyz did not report the database back")
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	require.Positive(t, ok.Load())
	t.Logf("answered %d, refused or failed %d", ok.Load(), failed.Load())

	// The replicas stop (writing what they still hold), and what their
	// journals kept is replayed, as their next start would.
	for _, r := range replicas {
		r.stop()
	}
	st, err := store.Open(context.Background(), pg.url())
	require.NoError(t, err)
	defer st.Close()
	for _, j := range journals {
		_, err := usagelog.ReplayJournal(context.Background(), st, j)
		require.NoError(t, err)
	}
	acct, err := st.AccountByEmail(context.Background(), "pg@example.com")
	require.NoError(t, err)
	u, err := st.KeyUsage(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, ok.Load(), u.TotalRequests-u.ErrorRequests, "every answer recorded, once")
	assert.Equal(t, money.Nanos(ok.Load())*mockCost, u.Cost, "every answered request costs the mock's usage, once")
	assert.Equal(t, initial-u.Cost, acct.Balance, "final balance == initial − Σ recorded costs: no double debit")
	assert.Zero(t, acct.Reserved, "every hold released")
}
