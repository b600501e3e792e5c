package dashboard

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/tollgate/tollgate/store"
)

//go:embed templates/*.html
var templateFS embed.FS

// layoutFile holds the frame every page is drawn in; each other file in
// templates/ is one page that defines "content".
const layoutFile = "templates/layout.html"

// pages are the parsed page templates, by name (the file name without
// ".html").
type pages struct {
	byName map[string]*template.Template
}

// parsePages parses every page with the layout; cssURL is where the
// stylesheet is served. An error names the broken file.
func parsePages(cssURL, jsURL string) (*pages, error) {
	funcs := template.FuncMap{"cssURL": func() string { return cssURL }, "jsURL": func() string { return jsURL },
		"keySorts": func() any { return keySorts }, "keyWindows": func() any { return keyWindows }}
	layout, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, layoutFile)
	if err != nil {
		return nil, fmt.Errorf("dashboard: parse %s: %w", layoutFile, err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: list templates: %w", err)
	}
	p := &pages{byName: make(map[string]*template.Template, len(files))}
	for _, f := range files {
		if f == layoutFile {
			continue
		}
		t, err := layout.Clone()
		if err != nil {
			return nil, fmt.Errorf("dashboard: clone layout: %w", err)
		}
		t, err = t.ParseFS(templateFS, f)
		if err != nil {
			return nil, fmt.Errorf("dashboard: parse %s: %w", f, err)
		}
		if t.Lookup("content") == nil {
			return nil, fmt.Errorf("dashboard: %s does not define \"content\"", f)
		}
		p.byName[strings.TrimSuffix(path.Base(f), ".html")] = t
	}
	return p, nil
}

// view is what the layout template is given: the frame's facts and the
// page's own data in Page.
type view struct {
	Title string
	// Account is the signed-in account; nil on pages shown without a session.
	Account *store.Account
	// Who is the signed-in member's email, Role its role ("" for none).
	Who, Role string
	// CSRF is the session's token for the forms on the page.
	CSRF string
	// Section is the navigation's entry the page belongs to ("keys",
	// "usage", …), marked as the current page.
	Section string
	Page    any
}

// render executes page name into a buffer first, so that a failing
// template gives a clean 500 instead of half a page.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name string, s *session, title string, page any) {
	t, ok := d.pages.byName[name]
	if !ok {
		d.log.ErrorContext(r.Context(), "dashboard: no such template", "template", name)
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	v := view{Title: title, Page: page, Section: sectionOf(r.URL.Path)}
	if s != nil {
		v.Account = &s.account
		v.CSRF = s.csrfToken()
		v.Who, v.Role = s.who, s.actor.Role
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		d.log.ErrorContext(r.Context(), "dashboard: render page", "template", name, "err", err)
		if name != "error" {
			d.render(w, r, http.StatusInternalServerError, "error", nil, errInternal.title,
				errorPage{Title: errInternal.title, Message: errInternal.message})
			return
		}
		http.Error(w, "Internal Server Error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if w.Header().Get("Cache-Control") == "" {
		w.Header().Set("Cache-Control", "no-cache, private")
	}
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(buf.Bytes()) // the client may have gone; nothing to do about it
	}
}

// sections are the navigation's entries, by the first segment of a path.
var sections = map[string]bool{"keys": true, "usage": true, "budgets": true, "teams": true, "billing": true, "webhooks": true, "models": true, "tokens": true, "activity": true, "members": true}

// sectionOf is the navigation entry a path belongs to: /keys/{id}/edit is
// "keys", /usage.csv none ("").
func sectionOf(path string) string {
	first, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	if sections[first] {
		return first
	}
	return ""
}
