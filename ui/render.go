package ui

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/numfmt"
	"github.com/ctxd/ctxd/memory"
)

//go:embed templates
var templateFS embed.FS

// pages are the page templates; each is parsed with the shared layout and
// partials into a set of its own, so each may define "content".
var pages = []string{"login", "error", "sessions", "session", "cold", "messages", "tuning", "search"}

var templates = parseTemplates()

func parseTemplates() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html"))
	out := map[string]*template.Template{}
	for _, p := range pages {
		out[p] = template.Must(template.Must(base.Clone()).ParseFS(templateFS, "templates/"+p+".html"))
	}
	return out
}

var funcs = template.FuncMap{
	"num":       numfmt.Thousands,
	"pct":       func(f float64) string { return strconv.FormatFloat(f*100, 'f', 1, 64) + "%" },
	"pct100":    func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "%" }, // a figure in percent already
	"score":     func(f float64) string { return strconv.FormatFloat(f, 'f', 3, 64) },
	"score2":    func(f float64) string { return strconv.FormatFloat(f, 'f', 2, 64) },
	"ts":        func(t time.Time) string { return formatTime(t) },
	"clip":      clip,
	"long":      func(s string, n int) bool { return utf8.RuneCountInString(s) > n },
	"gauge":     gaugeSVG,
	"highlight": highlight,
	"add":       func(a, b int) int { return a + b },
	"sub":       func(a, b int) int { return a - b },
	"coldRow":   func(m *memory.Message, back string) coldRowView { return coldRowView{M: m, Back: back} },
	"coldOf":    func(st *memory.Status) int { return st.Messages.Dropped + st.Messages.Summarized },
	// cursorAt is the messages page's cursor of the page that starts at
	// the message of seq: a search result opens where the match is.
	"cursorAt": func(seq uint64) string { return strconv.FormatUint(max(seq, 1)-1, 10) },
	"stateClass": func(s string) string {
		return "st-" + strings.ReplaceAll(s, "_", "-")
	},
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// clip cuts s to n characters, at a character boundary.
func clip(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n]) + "…"
}

// Snippets from the index mark matched words with « and »: each piece is
// escaped, and only the marks become HTML.
func highlight(s string) template.HTML {
	var b strings.Builder
	for {
		open := strings.Index(s, "«")
		if open < 0 {
			break
		}
		end := strings.Index(s[open:], "»")
		if end < 0 {
			break
		}
		b.WriteString(template.HTMLEscapeString(s[:open]))
		b.WriteString("<mark>")
		b.WriteString(template.HTMLEscapeString(s[open+len("«") : open+end]))
		b.WriteString("</mark>")
		s = s[open+end+len("»"):]
	}
	b.WriteString(template.HTMLEscapeString(s))
	return template.HTML(b.String())
}

// page is what every page's layout needs, with the page's own data.
type page struct {
	Title   string
	Caller  Caller
	Keys    bool // the server has keys: show who is logged in, and logout
	Nav     string
	Session *memory.Status // on a session's pages
	Tab     string
	Flash   string
	Version string // the running build, in the footer
	Data    any
}

func (h *Handler) newPage(r *http.Request, title, nav string, data any) page {
	return page{Title: title, Caller: callerOf(r.Context()), Keys: h.opts.KeysRequired, Nav: nav, Data: data, Version: h.opts.Version,
		Flash: flashes[r.URL.Query().Get("flash")]}
}

// render executes a page's template into a buffer first, so a template
// error is a clean 500 and not half a page. Pages fill the layout; the
// login page, served before a key is given, is a document of its own.
func (h *Handler) render(w http.ResponseWriter, status int, name string, data any) {
	target := "layout"
	if name == "login" {
		target = "login"
	}
	h.execute(w, status, templates[name], target, data)
}

// renderFragment executes one named template of a page's set: the part a
// script swaps in.
func (h *Handler) renderFragment(w http.ResponseWriter, pageName, fragment string, data any) {
	h.execute(w, http.StatusOK, templates[pageName], fragment, data)
}

func (h *Handler) execute(w http.ResponseWriter, status int, t *template.Template, target string, data any) {
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, target, data); err != nil {
		h.opts.Logger.Error("render dashboard page", "template", target, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// isFragment: our script asks for a part of a page, not a page.
func isFragment(r *http.Request) bool { return r.Header.Get("X-Ctxd-Fragment") == "1" }

type errorView struct {
	Status        int
	Code, Message string
}

// fail answers an error: the API's JSON error to our script, a page to a
// person. Internal errors are logged and not described.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	code, msg := memory.ErrorCode(err), memory.ErrorMessage(err)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		code, msg = memory.EUNAVAILABLE, "request cancelled or timed out before it finished"
	}
	status := api.StatusOf(code)
	if status == 0 {
		status = http.StatusInternalServerError
	}
	if status >= 500 {
		h.opts.Logger.ErrorContext(r.Context(), "dashboard request failed", "path", r.URL.Path, "err", err)
		if code != memory.EUNAVAILABLE {
			msg = "internal error"
		}
	}
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ctxd"`)
	}
	if status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	if isFragment(r) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
		return
	}
	p := h.newPage(r, fmt.Sprintf("%d %s", status, http.StatusText(status)), "", errorView{Status: status, Code: code, Message: msg})
	h.render(w, status, "error", p)
}
