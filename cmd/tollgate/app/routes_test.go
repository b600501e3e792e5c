package app

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tollgate/tollgate/internal/guard"
)

// TestAPanicInTheDashboardOrTheManagementAPIIs500: each route's handler
// runs under guard: a panic answers 500 internal_error, is counted under
// its boundary, and the listener serves the next request.
func TestAPanicInTheDashboardOrTheManagementAPIIs500(t *testing.T) {
	panicky := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler") })
	fine := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux := routes(fine, panicky, panicky, slog.New(slog.DiscardHandler))
	for path, where := range map[string]string{"/api/v1/keys": "manage", "/login": "dashboard"} {
		before := guard.CountOf(where)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		assert.Equal(t, http.StatusInternalServerError, rec.Code, path)
		assert.Contains(t, rec.Body.String(), `"code":"internal_error"`, path)
		assert.Equal(t, before+1, guard.CountOf(where), path)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil))
	assert.Equal(t, http.StatusNoContent, rec.Code)
}
