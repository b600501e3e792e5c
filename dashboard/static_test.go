package dashboard

import (
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStylesheetIsServedUnderItsContentHash(t *testing.T) {
	e := newEnv(t)
	assert.Regexp(t, `^/static/[0-9a-f]{16}/style.css$`, e.d.static.url)
	page := e.anonymous().get("/login").Body.String()
	m := regexp.MustCompile(`<link rel="stylesheet" href="([^"]+)">`).FindStringSubmatch(page)
	require.NotNil(t, m)
	assert.Equal(t, e.d.static.url, m[1])

	w := e.anonymous().get(m[1])
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/css; charset=utf-8", w.Header().Get("Content-Type"))
	assert.Equal(t, "public, max-age=31536000, immutable", w.Header().Get("Cache-Control"))
	assert.Equal(t, styleCSS, w.Body.Bytes())

	r := httptest.NewRequest(http.MethodGet, m[1], nil)
	r.Header.Set("If-None-Match", w.Header().Get("ETag"))
	assert.Equal(t, http.StatusNotModified, e.anonymous().do(r).Code)

	assert.Equal(t, http.StatusNotFound, e.anonymous().get("/static/0123456789abcdef/style.css").Code, "an old hash")
}
