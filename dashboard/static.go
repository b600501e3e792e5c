package dashboard

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"net/http"
	"strconv"
)

//go:embed static/style.css
var styleCSS []byte

// dashboardJS is the pages' one script, a progressive enhancement: every
// page works without it (the server checks everything), it only makes the
// forms say what the visitor means and copies secrets.
//
//go:embed static/dashboard.js
var dashboardJS []byte

// staticFile is a stylesheet or script and the URL it is served at: the
// URL holds a hash of the content, so browsers may keep it for a year and a
// new build is fetched at once.
type staticFile struct {
	url         string
	body        []byte
	etag        string
	contentType string
}

func newStaticFile(name, contentType string, body []byte) staticFile {
	sum := sha256.Sum256(body)
	h := hex.EncodeToString(sum[:8])
	return staticFile{url: "/static/" + h + "/" + name, body: body, etag: strconv.Quote(h), contentType: contentType}
}

func (f staticFile) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", f.contentType)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", f.etag)
	if r.Header.Get("If-None-Match") == f.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(f.body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(f.body) // the client may have gone; nothing to do about it
	}
}
