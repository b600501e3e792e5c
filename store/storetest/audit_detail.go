package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

// testAuditDetailAndFilter: an entry keeps its detail (what changed), an
// oversized one is refused, and ListAuditWhere selects by action and time.
func testAuditDetailAndFilter(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newAccount(t, s, "ada@example.com", 0)
	base := time.Now().UTC().Truncate(time.Second)
	detail := `{"name":"ci","changes":{"enabled":["true","false"]}}`
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "cli", Action: "key.disable", Target: "key_1", At: base, Detail: detail}))
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "cli", Action: "key.create", Target: "key_1", At: base.Add(-time.Hour)}))
	require.NoError(t, s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "cli", Action: "key.disable", Target: "key_2", At: base.Add(-48 * time.Hour)}))
	err := s.AddAudit(ctx, store.AuditEntry{AccountID: a.ID, Actor: "cli", Action: "key.update", Target: "key_1",
		Detail: `{"name":"` + strings.Repeat("x", store.MaxAuditDetail) + `"}`})
	require.Error(t, err, "a detail over the bound")

	all, err := s.ListAudit(ctx, a.ID, nil, 0)
	require.NoError(t, err)
	require.Len(t, all, 3)
	assert.Equal(t, detail, all[0].Detail)
	assert.Empty(t, all[1].Detail, "none recorded")

	got, err := s.ListAuditWhere(ctx, a.ID, store.AuditFilter{Action: "key.disable"}, nil, 0)
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "key_1", got[0].Target)
	got, err = s.ListAuditWhere(ctx, a.ID, store.AuditFilter{Action: "key.disable", From: base.Add(-24 * time.Hour)}, nil, 0)
	require.NoError(t, err)
	require.Len(t, got, 1)
	got, err = s.ListAuditWhere(ctx, a.ID, store.AuditFilter{To: base}, nil, 0)
	require.NoError(t, err)
	require.Len(t, got, 2, "To is excluded")
	assert.Equal(t, "key.create", got[0].Action)
	got, err = s.ListAuditWhere(ctx, a.ID, store.AuditFilter{Action: "key.disable"}, &all[0], 0)
	require.NoError(t, err)
	require.Len(t, got, 1, "with a cursor")
	assert.Equal(t, "key_2", got[0].Target)
}
