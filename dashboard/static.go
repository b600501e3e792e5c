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

// staticFile is the stylesheet and the URL it is served at: the URL holds a
// hash of the content, so browsers may keep it for a year and a new build
// is fetched at once.
type staticFile struct {
	url  string
	body []byte
	etag string
}

func newStaticFile() staticFile {
	sum := sha256.Sum256(styleCSS)
	h := hex.EncodeToString(sum[:8])
	return staticFile{url: "/static/" + h + "/style.css", body: styleCSS, etag: strconv.Quote(h)}
}

func (d *Dashboard) serveStatic(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", d.static.etag)
	if r.Header.Get("If-None-Match") == d.static.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(d.static.body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(d.static.body) // the client may have gone; nothing to do about it
	}
}
