package restapi

import (
	"fmt"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/tollgate/tollgate/store/storetest"
)

// database is one the API's tests run on.
type database struct {
	name string
	url  func(t testing.TB) string // a fresh, empty database for t
}

// The databases: every test of the API runs on SQLite by itself, and
// again on PostgreSQL (each on a fresh schema) from onPostgreSQL's table.
var (
	sqlite = database{"SQLite", func(t testing.TB) string {
		return storetest.SQLite(t)
	}}
	postgres = database{"PostgreSQL", storetest.PostgresURL}
)

// onPostgreSQL are the tests TestTheAPIOnPostgreSQL runs again on
// PostgreSQL. TestMain fails the run when a test that builds an API
// environment is missing from it.
var onPostgreSQL = map[string]func(*testing.T){
	"Unauthorized":   TestWithoutAValidManagementTokenEveryCallIs401,
	"Keys":           TestKeysAcrossTokenKindsScopesAndAccounts,
	"KeysPages":      TestKeysListPagesFiltersAndCursors,
	"IfMatch":        TestIfMatchKeepsTwoEditorsFromOverwritingEachOther,
	"Tokens":         TestTokensAreMadeByAdminsOnlyAndAuditedWithEveryAction,
	"Idempotency":    TestARetriedCreateWithAnIdempotencyKeyGetsTheFirstAnswer,
	"Usage":          TestUsageOfAKeyOrAnAccountOverARangeAndAsCSV,
	"CSVDeadlines":   TestACSVExportBoundsEachPagesWrite,
	"Accounts":       TestAccountsAreAdminsAndARetriedCreditIsNeverASecondCredit,
	"Models":         TestModelsAreThePlansWithPricesAndAvailability,
	"Rotation":       TestRotationGivesANewSecretAndKeepsTheOldOneOnlyThroughItsGrace,
	"Balance":        TestBalanceHistoryWorksBackFromTheBalanceNow,
	"Client":         TestTheGeneratedClientDrivesEveryEndpoint,
	"Caps":           TestAnAccountHoldsAtMostItsCapOfKeysAndTokens,
	"RateLimit":      TestManagementCallsAreLimitedPerToken,
	"Scopes":         TestNoRouteAnswersATokenWithoutItsScope,
	"Document":       TestTheAPIAcceptsAndRefusesWhatItsDocumentSays,
	"Query":          TestQueryParametersAreTheDocumentsWithTheirValues,
	"OpenAPI":        TestTheOpenAPIDocumentIsServedAndDescribesEveryRoute,
	"KeyBudgets":     TestKeyBudgetsAreSetAndReadWithTheirWindows,
	"AccountBudgets": TestAccountBudgetsFollowTheAccountsTimeZone,
	"PlanBudgets":    TestANewKeyGetsItsPlansDefaultBudgets,
	"AuditDetail":    TestAuditEntriesSayWhatChangedWithoutSecrets,
	"BudgetAudit":    TestBudgetAndTimezoneChangesAreAuditedBeforeAndAfter,
	"Roles":          TestAMembersTokenIsAllowedWhatItsRoleAllowsThroughTheAPI,
	"MemberAudit":    TestTheAuditLogNamesTheMemberBehindAToken,
}

// runs records, per database, the tests (by function name) that built an
// API environment on it; chosen maps a running *testing.T to the database
// its runner chose for it (none: SQLite).
var (
	chosen sync.Map
	runs   = struct {
		sync.Mutex
		on map[string]map[string]bool
	}{on: map[string]map[string]bool{}}
)

// databaseFor is the database the test t builds its API environment on,
// recorded as run there.
func databaseFor(t *testing.T) database {
	c := choice{sqlite, t.Name()}
	if d, ok := chosen.Load(t); ok {
		c = d.(choice)
	}
	runs.Lock()
	defer runs.Unlock()
	if runs.on[c.db.name] == nil {
		runs.on[c.db.name] = map[string]bool{}
	}
	runs.on[c.db.name][c.test] = true
	return c.db
}

// choice is a database a runner chose for a test function.
type choice struct {
	db   database
	test string // the function's name
}

// testFunc is a test function's name, as the testing package names the
// test.
func testFunc(f func(*testing.T)) string {
	full := runtime.FuncForPC(reflect.ValueOf(f).Pointer()).Name()
	return full[strings.LastIndex(full, ".")+1:]
}

func TestTheAPIOnPostgreSQL(t *testing.T) {
	for name, test := range onPostgreSQL {
		t.Run(name, func(t *testing.T) {
			chosen.Store(t, choice{postgres, testFunc(test)})
			defer chosen.Delete(t)
			test(t)
		})
	}
}

// TestMain runs the tests, then checks that every test that built an API
// environment on SQLite ran on PostgreSQL too (when the PostgreSQL runs
// were not left out with -run).
func TestMain(m *testing.M) {
	code := m.Run()
	if missing := notOnPostgreSQL(); code == 0 && len(missing) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %s built an API environment on SQLite but is missing from onPostgreSQL (databases_test.go)\n", strings.Join(missing, ", "))
		code = 1
	}
	os.Exit(code)
}

func notOnPostgreSQL() []string {
	runs.Lock()
	defer runs.Unlock()
	if len(runs.on[postgres.name]) == 0 {
		return nil
	}
	var missing []string
	for name := range runs.on[sqlite.name] {
		if !runs.on[postgres.name][name] {
			missing = append(missing, name)
		}
	}
	slices.Sort(missing)
	return missing
}
