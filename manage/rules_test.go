package manage

import (
	"context"
	"math"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/internal/testclock"
	"github.com/tollgate/tollgate/keyopts"
	"github.com/tollgate/tollgate/oaierror"
	"github.com/tollgate/tollgate/store"
)

// The rules that need no SQL, over fakeStore: the door's checks of key
// options and plans, who may read what, and what a refusal leaves behind.

// testConfig is the configuration of the rules' tests: plans pro (every
// model) and basic (gpt-4o-mini).
const testConfig = `
key_prefix: tt
providers:
  - {name: openai, type: openai, base_url: "https://api.openai.com/v1", api_key: sk-test}
models:
  - {id: gpt-4o-mini, max_tokens: 16384, deployments: [{provider: openai, model: gpt-4o-mini}]}
  - {id: o3, max_tokens: 100000, deployments: [{provider: openai, model: o3}]}
plans:
  - {name: pro, models: ["*"]}
  - {name: basic, models: [gpt-4o-mini]}
`

func ptr[T any](v T) *T { return &v }

// fakeEnv is a Service over a fakeStore with testConfig and two accounts.
type fakeEnv struct {
	st   *fakeStore
	svc  *Service
	a, b store.Account // a is on basic, b on pro
}

func newFakeEnv(t *testing.T, withConfig bool) *fakeEnv {
	t.Helper()
	var cfg *config.Config
	if withConfig {
		var err error
		cfg, err = config.Parse([]byte(testConfig), func(string) (string, bool) { return "", false })
		require.NoError(t, err)
	}
	clock := testclock.New(time.Date(2026, 6, 15, 14, 30, 0, 0, time.UTC))
	e := &fakeEnv{st: newFakeStore()}
	var err error
	e.svc, err = New(Options{Store: e.st, Config: func() *config.Config { return cfg }, Now: clock.Now})
	require.NoError(t, err)
	ctx := context.Background()
	e.a, err = e.st.CreateAccount(ctx, store.Account{Email: "a@example.com", Plan: "basic"})
	require.NoError(t, err)
	e.b, err = e.st.CreateAccount(ctx, store.Account{Email: "b@example.com", Plan: "pro"})
	require.NoError(t, err)
	return e
}

var admin = Actor{Kind: ActorCLI}

func userOf(accountID string) Actor {
	return Actor{Kind: ActorUser, ID: accountID, AccountID: accountID}
}

func TestEveryBadOptionIsNamedAtOnceAndNothingIsSaved(t *testing.T) {
	e := newFakeEnv(t, true)
	p := keyopts.Patch{Description: ptr(" "), RateLimit: ptr("ten"), IPRestrictions: &[]string{"10.0.0.300"}}
	_, _, err := e.svc.CreateKey(context.Background(), userOf(e.a.ID), e.a.ID, p)

	var opts *OptionsError
	require.ErrorAs(t, err, &opts)
	fields := make([]string, len(opts.Fields))
	for i, f := range opts.Fields {
		fields[i] = f.Field
	}
	assert.Equal(t, []string{keyopts.FieldDescription, keyopts.FieldRateLimitRPM, keyopts.FieldIPRestrictions}, fields, "every field, in order")
	var api oaierror.Error
	require.ErrorAs(t, err, &api, "the API answers it as it is")
	assert.Equal(t, http.StatusBadRequest, api.Status)
	assert.Equal(t, keyopts.FieldDescription, api.Param, "the first field")
	assert.Contains(t, api.Message, `description: is required; rate_limit_rpm: "ten" is not a whole number`)
	assert.Empty(t, e.st.keys, "nothing saved")
	assert.Empty(t, e.st.audit, "nothing audited")
}

func TestTheAllowListStaysWithinThePlanOnCreateUpdateAndCheck(t *testing.T) {
	e := newFakeEnv(t, true)
	ctx := context.Background()
	outside := keyopts.Patch{Description: ptr("ci"), Models: &[]string{"gpt-4o-mini", " o3 "}}

	_, _, err := e.svc.CreateKey(ctx, userOf(e.a.ID), e.a.ID, outside)
	var opts *OptionsError
	require.ErrorAs(t, err, &opts)
	assert.Equal(t, "o3", opts.NotInPlan, "the model, trimmed")
	assert.Equal(t, "basic", opts.Plan)
	assert.Equal(t, `models: "o3" is not in the account's plan (basic)`, opts.Fields.Error())
	assert.Empty(t, e.st.keys)

	k, _, err := e.svc.CreateKey(ctx, userOf(e.a.ID), e.a.ID, keyopts.Patch{Description: ptr("ci")})
	require.NoError(t, err)
	require.ErrorAs(t, e.svc.CheckKey(ctx, userOf(e.a.ID), "", k.ID, keyopts.Patch{Models: &[]string{"o3"}}), &opts)
	_, err = e.svc.UpdateKey(ctx, userOf(e.a.ID), k.ID, "", keyopts.Patch{Models: &[]string{"o3"}})
	require.ErrorAs(t, err, &opts)
	assert.Nil(t, e.st.keys[k.ID].Models, "the key keeps All Models")
	assert.Equal(t, int64(1), e.st.keys[k.ID].Version)

	// Another plan allows it; checking saves nothing either way.
	require.NoError(t, e.svc.CheckKey(ctx, userOf(e.b.ID), e.b.ID, "", outside))
	assert.Len(t, e.st.keys, 1)
	assert.Len(t, e.st.audit, 1, "only the creation is audited")
}

func TestAnotherAccountsObjectsAreNotFound(t *testing.T) {
	e := newFakeEnv(t, true)
	ctx := context.Background()
	k, _, err := e.svc.CreateKey(ctx, admin, e.b.ID, keyopts.Patch{Description: ptr("b's")})
	require.NoError(t, err)
	them := userOf(e.a.ID)

	_, err = e.svc.GetKey(ctx, them, k.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.ErrorIs(t, e.svc.CheckKey(ctx, them, "", k.ID, keyopts.Patch{Description: ptr("x")}), ErrNotFound)
	_, err = e.svc.AccountKeys(ctx, them, e.b.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = e.svc.Summary(ctx, them, UsageRequest{KeyID: k.ID, AllTime: true})
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = e.svc.AccountByEmail(ctx, them, "b@example.com")
	assert.ErrorIs(t, err, ErrAdminOnly, "only an admin finds accounts by email")
	assert.Empty(t, e.st.queries, "no usage was read")
}

func TestOnlyAnAdminReadsADeletedKeysUsageAndOnlyWhenAskedTo(t *testing.T) {
	e := newFakeEnv(t, true)
	ctx := context.Background()
	k, _, err := e.svc.CreateKey(ctx, admin, e.a.ID, keyopts.Patch{Description: ptr("gone")})
	require.NoError(t, err)
	require.NoError(t, e.svc.DeleteKey(ctx, admin, k.ID))

	_, err = e.svc.Summary(ctx, admin, UsageRequest{KeyID: k.ID, AllTime: true})
	assert.ErrorIs(t, err, ErrNotFound, "not without OrDeleted")
	_, err = e.svc.Summary(ctx, userOf(e.a.ID), UsageRequest{KeyID: k.ID, AllTime: true, OrDeleted: true})
	assert.ErrorIs(t, err, ErrNotFound, "not for the account's user")
	_, err = e.svc.Records(ctx, admin, UsageRequest{KeyID: k.ID, AllTime: true, OrDeleted: true}, nil, 5)
	require.NoError(t, err)
	require.Len(t, e.st.queries, 1)
	assert.Equal(t, store.UsageQuery{KeyID: k.ID}, e.st.queries[0], "the key's records, all time, whoever's they were")
}

func TestUsageRangesAreBoundedUnlessAllTime(t *testing.T) {
	e := newFakeEnv(t, true)
	ctx := context.Background()
	now := e.svc.opt.Now().UTC()
	_, err := e.svc.Summary(ctx, admin, UsageRequest{AccountID: e.a.ID})
	require.NoError(t, err)
	assert.Equal(t, store.UsageQuery{AccountID: e.a.ID, From: now.Add(-DefaultUsageSpan), To: now}, e.st.queries[0], "30 days to now")

	_, err = e.svc.Summary(ctx, admin, UsageRequest{AccountID: e.a.ID, From: now.Add(-400 * 24 * time.Hour)})
	assert.ErrorContains(t, err, "at most 366 days")
	_, err = e.svc.Records(ctx, admin, UsageRequest{AccountID: e.a.ID, AllTime: true, From: now.Add(-400 * 24 * time.Hour), Outcome: store.OutcomeError}, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, store.UsageQuery{AccountID: e.a.ID, Outcome: store.OutcomeError}, e.st.queries[1], "AllTime ignores the range")
	_, err = e.svc.Records(ctx, admin, UsageRequest{AccountID: e.a.ID, Outcome: "maybe"}, nil, 1)
	assert.ErrorContains(t, err, "outcome must be ok or error")
	_, err = e.svc.Records(ctx, admin, UsageRequest{AccountID: e.a.ID}, nil, store.MaxUsageRecords+1)
	assert.ErrorContains(t, err, "limit must be from 1")
	assert.Len(t, e.st.queries, 2, "a refused read reads nothing")
}

func TestAccountRulesWithAndWithoutAConfiguration(t *testing.T) {
	ctx := context.Background()
	e := newFakeEnv(t, true)
	_, err := e.svc.CreateAccount(ctx, admin, "c@example.com", "gold", 0)
	assert.ErrorContains(t, err, `plan must be one of the configuration's plans (pro, basic), not "gold"`)

	bare := newFakeEnv(t, false)
	_, err = bare.svc.CreateAccount(ctx, admin, "c@example.com", "gold", 0)
	assert.NoError(t, err, "without a configuration any short name is a plan")
	_, err = bare.svc.CreateAccount(ctx, admin, "d@example.com", "", 0)
	assert.ErrorContains(t, err, "plan must be a name")
	_, err = bare.svc.SetPlan(ctx, admin, bare.a.ID, "bad\nplan")
	assert.ErrorContains(t, err, "plan must be a name")

	bare.st.accounts[bare.a.ID] = store.Account{ID: bare.a.ID, Email: bare.a.Email, Plan: "basic", Balance: math.MaxInt64 - 5}
	_, err = bare.svc.CreditAccount(ctx, admin, bare.a.ID, 10)
	assert.ErrorContains(t, err, "past what it can hold")
	assert.EqualValues(t, math.MaxInt64-5, bare.st.accounts[bare.a.ID].Balance, "not credited")
}

// TestAnInvalidChangeIsRefusedAsSuchWhateverItsIfMatch: a change that is
// invalid on its face gets its field errors (400), not 412, even with a
// stale If-Match; a valid change with a stale If-Match gets 412.
func TestAnInvalidChangeIsRefusedAsSuchWhateverItsIfMatch(t *testing.T) {
	e := newFakeEnv(t, true)
	ctx := context.Background()
	k, _, err := e.svc.CreateKey(ctx, userOf(e.a.ID), e.a.ID, keyopts.Patch{Description: ptr("ci")})
	require.NoError(t, err)
	_, err = e.svc.UpdateKey(ctx, userOf(e.a.ID), k.ID, `W/"stale"`, keyopts.Patch{Description: ptr("")})
	var opts *OptionsError
	require.ErrorAs(t, err, &opts, "the empty description is named")
	_, err = e.svc.UpdateKey(ctx, userOf(e.a.ID), k.ID, `W/"stale"`, keyopts.Patch{Description: ptr("new")})
	require.ErrorIs(t, err, ErrPrecondition)
	assert.Equal(t, "ci", e.st.keys[k.ID].Description, "nothing saved")
}
