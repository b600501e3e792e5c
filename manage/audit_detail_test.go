package manage

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/store"
)

func TestAnAuditDetailIsBounded(t *testing.T) {
	long := strings.Repeat("é", 1000)
	d := AuditDetail{Name: long, Changes: map[string][2]string{"description": {long, long}, "ip_restrictions": {long, long}}}
	enc := d.encode()
	require.NotEmpty(t, enc)
	assert.LessOrEqual(t, len(enc), store.MaxAuditDetail)
	assert.Equal(t, "", AuditDetail{}.encode())
}
