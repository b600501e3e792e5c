package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/cli"
	"github.com/tollgate/tollgate/internal/testenv"
	"github.com/tollgate/tollgate/store"
	"github.com/tollgate/tollgate/store/storetest"
)

// tollgate is one running `tollgate serve`.
type tollgate struct {
	// BaseURL is where the tests reach the API: the built-in edge's
	// /v1, or Envoy's under the envoy binding.
	BaseURL string
	// Listener is Tollgate's own HTTP listener (http://host:port): the
	// built-in edge and the dashboard, or the dashboard alone behind
	// Envoy.
	Listener string
	DB       string
	Config   string
	Store    store.Store
	stop     func()
	logs     *syncBuffer
	envoy    *envoyProc // under the envoy binding
	certs    string     // under the envoy binding: the mutual-TLS certificates' directory
}

// syncBuffer is the log sink each server writes to and its test reads.
type syncBuffer = testenv.Buffer

// apiLine is the line serve prints when it is up: the API's URL, or (with
// --edge off) the dashboard's; either gives the listener's base.
var apiLine = regexp.MustCompile(`(?:API|dashboard) at (http://[^/\s]+)/`)

// binding is what serves the API in every test of this suite: the built-in
// edge calling the ext_authz and ext_proc code in process (the default),
// the built-in edge calling them over gRPC as Envoy does
// (TOLLGATE_E2E_BINDING=grpc), or a real Envoy in front of Tollgate's gRPC
// server (TOLLGATE_E2E_BINDING=envoy, envoy_test.go). `make test` runs it
// all three ways.
func binding() string {
	if b := os.Getenv("TOLLGATE_E2E_BINDING"); b != "" {
		return b
	}
	return "in-process"
}

// startTollgate writes cfg to a file and runs `tollgate serve` on free
// ports with the given database URL (a fresh SQLite file when empty), in
// front of it the binding's edge.
func startTollgate(t testing.TB, cfg string, db string, extra ...string) *tollgate {
	t.Helper()
	skipEnvoyLimitation(t)
	skipWhereAnotherRunCovers(t)
	switch b := binding(); b {
	case bindingEnvoy:
		return startBehindEnvoy(t, cfg, db, extra...)
	case "in-process", "grpc":
		return serve(t, cfg, db, append([]string{"--edge", b}, extra...)...)
	default:
		t.Fatalf("TOLLGATE_E2E_BINDING=%q: want in-process, grpc or envoy", b)
		return nil
	}
}

// coveredByAnotherRun are the tests whose subject a binding does not
// change, so that `make test` runs each where it can differ and not again:
// by binding, the tests it leaves to the other runs, with the reason.
var coveredByAnotherRun = map[string]map[string]string{
	"grpc": {
		// The gRPC binding differs from the in-process one only in how the
		// edge calls ext_authz and ext_proc; these tests' subject is what
		// the dashboard and the management API serve on Tollgate's own
		// listener, which is the same code on both.
		"TestDashboardPagesFitAPhoneAndPassAxe":                      sameListener,
		"TestDashboardManagesAKeyInABrowser":                         sameListener,
		"TestDashboardKeyListIsOneLineAKey":                          sameListener,
		"TestDashboardAPastExpiryOnEditAsksFirst":                    sameListener,
		"TestDashboardSecretPageShowsCodeThatRuns":                   sameListener,
		"TestDashboardTokensAskBeforeRevokingAndSayWhy":              sameListener,
		"TestDashboardBillingActivityAndNavigation":                  sameListener,
		"TestDashboardUsagePagesShowRefusalsAndFitAPhone":            sameListener,
		"TestDashboardPeopleInviteJoinAndLoseAccess":                 sameListener,
		"TestTheManagementAPIHoldsToItsDocumentUnderGeneratedCalls":  sameListener,
		"TestAPrivateAddressWebhookIsRefused":                        sameListener,
		"TestDashboardSignsInWithSingleSignOn":                       sameListener,
		"TestAnthropicClientMatricesPassAgainstTheMessagesAPIItself": noTollgate,
		"TestClaudeCodeAnswersTheMessagesAPIItself":                  noTollgate,
		// A client's compatibility is the bytes ext_proc writes, the same
		// whether the edge calls it in process or over gRPC.
		"TestPythonClientMatrix":                     sameBytes,
		"TestJavaScriptClientMatrix":                 sameBytes,
		"TestRAGClientsEmbedAndRerankOffline":        sameBytes,
		"TestAnthropicPythonClientMatrix":            sameBytes,
		"TestAnthropicJavaScriptClientMatrix":        sameBytes,
		"TestClaudeCodeAnswersThroughTollgate":       sameBytes,
		"TestTheREADMEsFirstRunAnswersOffline":       sameBytes,
		"TestTheREADMEsClaudeCodeLineAnswersOffline": sameBytes,
	},
	bindingEnvoy: {
		// Behind Envoy the dashboard's pages pass through Envoy's route
		// unchanged; TestDashboardManagesAKeyInABrowser (sign-in, cookies,
		// forms, redirects) proves that route, and the layout and wording
		// of each page are the in-process run's subject.
		"TestDashboardPagesFitAPhoneAndPassAxe":                      samePages,
		"TestDashboardKeyListIsOneLineAKey":                          samePages,
		"TestDashboardAPastExpiryOnEditAsksFirst":                    samePages,
		"TestDashboardSecretPageShowsCodeThatRuns":                   samePages,
		"TestDashboardTokensAskBeforeRevokingAndSayWhy":              samePages,
		"TestDashboardBillingActivityAndNavigation":                  samePages,
		"TestDashboardUsagePagesShowRefusalsAndFitAPhone":            samePages,
		"TestDashboardPeopleInviteJoinAndLoseAccess":                 samePages,
		"TestAnthropicClientMatricesPassAgainstTheMessagesAPIItself": noTollgate,
		"TestClaudeCodeAnswersTheMessagesAPIItself":                  noTollgate,
		"TestDashboardSignsInWithSingleSignOn":                       sameSSO,
	},
}

const (
	sameListener = "the dashboard and the management API are the same under the gRPC binding: the in-process run covers it"
	sameBytes    = "a client sees the bytes ext_proc writes, the same over gRPC as in process: the in-process and Envoy runs cover it"
	noTollgate   = "the test runs clients straight against a provider mock, without Tollgate: the in-process run covers it"
	sameSSO      = "single sign-on is the dashboard's, behind Envoy's route unchanged: the in-process run covers it"
	samePages    = "a page's layout and words do not change behind Envoy: the in-process run covers it, " +
		"and TestDashboardManagesAKeyInABrowser proves the dashboard's route through Envoy"
)

// skipWhereAnotherRunCovers skips, naming the reason, a test that
// coveredByAnotherRun leaves to another binding's run.
func skipWhereAnotherRunCovers(t testing.TB) {
	t.Helper()
	top, _, _ := strings.Cut(t.Name(), "/")
	if reason, ok := coveredByAnotherRun[binding()][top]; ok {
		t.Skipf("covered by another run: %s", reason)
	}
}

// serve runs `tollgate serve` with the harness's flags, then extra.
func serve(t testing.TB, cfg string, db string, extra ...string) *tollgate {
	t.Helper()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	if db == "" {
		db = storetest.SQLite(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	logs := &syncBuffer{}
	done := make(chan error, 1)
	args := append([]string{"serve", "--config", cfgPath, "--db", db, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"}, extra...)
	go func() {
		err := cli.RunWith(ctx, args, pw, logs, cli.Hooks{RateLimitClock: windowsOf(t).Now, HealthClock: circuitsOf(t).Now})
		pw.Close()
		done <- err
	}()
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := apiLine.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1] + "/v1"
			}
		}
	}()
	var base string
	select {
	case base = <-urls:
	case err := <-done:
		cancel()
		t.Fatalf("tollgate serve exited: %v\n%s", err, logs.String())
	case <-time.After(time.Minute): // a race-built serve among the suite's others starts in seconds
		cancel()
		t.Fatalf("tollgate serve did not start\n%s", logs.String())
	}
	st, err := store.Open(context.Background(), db)
	require.NoError(t, err)
	tg := &tollgate{BaseURL: base, Listener: strings.TrimSuffix(base, "/v1"), DB: db, Config: cfgPath, Store: st, logs: logs}
	var once sync.Once
	tg.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("tollgate serve: %v", err)
				}
			case <-time.After(40 * time.Second):
				t.Errorf("tollgate serve did not stop")
			}
			st.Close()
		})
	}
	t.Cleanup(func() {
		tg.stop()
		if t.Failed() {
			t.Logf("tollgate logs:\n%s", logs.String())
		}
	})
	return tg
}

// run runs a CLI command against this instance's database and config.
func (tg *tollgate) run(t *testing.T, args ...string) string {
	t.Helper()
	out, err := tg.tryRun(args...)
	require.NoError(t, err, out)
	return out
}

func (tg *tollgate) tryRun(args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	args = append(args, "--db", tg.DB, "--config", tg.Config)
	err := cli.Run(context.Background(), args, &stdout, &stderr)
	if err != nil {
		return stdout.String() + stderr.String(), err
	}
	return stdout.String(), nil
}

// newAccount makes an account with a balance and returns a key secret.
func (tg *tollgate) newAccount(t *testing.T, email, balance string, keyArgs ...string) string {
	t.Helper()
	tg.run(t, "account", "create", "--email", email, "--plan", "pro", "--balance", balance)
	return tg.newKey(t, email, keyArgs...)
}

func (tg *tollgate) newKey(t *testing.T, email string, keyArgs ...string) string {
	t.Helper()
	out := tg.run(t, append([]string{"key", "create", "--account", email, "--description", "test key"}, keyArgs...)...)
	secret := strings.TrimSpace(out)
	require.Regexp(t, `^tg_sk_[0-9A-Za-z]{43}$`, secret)
	return secret
}

func (tg *tollgate) client(secret string, opts ...option.RequestOption) *openai.Client {
	c := openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(tg.BaseURL), option.WithAPIKey(secret), option.WithMaxRetries(0),
	}, opts...)...)
	return &c
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, cond func() bool, format string, args ...any) {
	t.Helper()
	waitFor(t, 5*time.Second, 20*time.Millisecond, cond, format, args...)
}

// waitFor polls cond every interval until it holds or d passes.
func waitFor(t *testing.T, d, interval time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+format, append([]any{d}, args...)...)
		}
		time.Sleep(interval)
	}
}

func configFor(providerURL string) string {
	return fmt.Sprintf(`key_prefix: tg
providers:
  - name: openai
    type: openai
    base_url: %s/v1
    api_key: sk-provider-secret
models:
  - id: gpt-4o-mini
    max_tokens: 16384
    input_price_per_million: 0.15
    output_price_per_million: 0.60
    deployments:
      - provider: openai
        model: gpt-4o-mini-2024-07-18
plans:
  - name: pro
    default_rpm: 0
    models: ["*"]
`, providerURL)
}
