package dashboard

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/tollgate/tollgate/internal/seal"
)

// A secret shown once, after a POST that made it (a key, a rotated key, a
// management token): the POST answers with a redirect (Post/Redirect/Get),
// and the secret crosses to the page it redirects to in a cookie, sealed
// (AES-GCM) under a key only this session can derive, for that page's path
// alone and a minute at most. The page shows it and clears the cookie: a
// reload, or the back button, finds no secret and says it was shown. Nothing
// is kept on the server, so any replica can show the page.

const (
	flashCookie = "tollgate_secret"
	flashMaxAge = time.Minute
)

// flashKey is the session's key for sealing secrets: derived from the
// session secret under a label of its own, never the CSRF token's.
func (s *session) flashKey() []byte { return seal.Key(s.secret, "tollgate secret flash") }

// setFlash seals secret for the page at path (the redirect's target),
// bound to that path so it cannot be replayed on another.
func (d *Dashboard) setFlash(w http.ResponseWriter, r *http.Request, s *session, path, secret string) error {
	sealed, err := seal.Seal(s.flashKey(), []byte(secret), []byte(path), rand.Reader)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: base64.RawURLEncoding.EncodeToString(sealed), Path: path,
		MaxAge: int(flashMaxAge.Seconds()), HttpOnly: true, Secure: isHTTPS(r), SameSite: http.SameSiteStrictMode})
	return nil
}

// takeFlash opens the secret sealed for this page and clears the cookie;
// "" when there is none (already shown, expired, or not this session's).
func (d *Dashboard) takeFlash(w http.ResponseWriter, r *http.Request, s *session) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: r.URL.Path, MaxAge: -1, HttpOnly: true,
		Secure: isHTTPS(r), SameSite: http.SameSiteStrictMode})
	sealed, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return ""
	}
	plain, err := seal.Open(s.flashKey(), sealed, []byte(r.URL.Path))
	if err != nil {
		return ""
	}
	return string(plain)
}
