// Package ui is ctxd's web dashboard, served at /ui/: the sessions and how
// full each is, one session's timeline, window, cold storage and messages,
// tuning figures and search. Pages are rendered on the server with
// html/template (every stored text is escaped: message content is untrusted
// input), charts are SVG drawn here, and the few lines of script are ours,
// embedded with the stylesheet. It calls memory.Service in-process with
// the caller's tenant and knows nothing of how keys are checked: the
// server hands it an Admit function.
package ui

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"log/slog"
	"net/http"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// Prefix is where the dashboard is mounted.
const Prefix = "/ui/"

// Caller is who a request acts as.
type Caller struct {
	Tenant string
	Admin  bool // may act as another tenant
}

// Options configures the dashboard.
type Options struct {
	// Admit checks a request's API key ("" when it sent none) and charges
	// its rate limit; asTenant is the tenant an admin key asks to act as
	// ("": its own). It returns a *memory.Error (unauthorized, forbidden,
	// rate_limited) to refuse. Nil admits every request as the default
	// tenant: the server has no keys.
	Admit func(r *http.Request, key, asTenant string) (Caller, error)
	// TakeBody is called for an admitted request before its handler: it
	// refuses a body over the server's limits and returns what gives the
	// body's share of the in-flight budget back. Requests not admitted take
	// no share (the login form's body is capped at LoginBodyLimit instead),
	// so a client without a key cannot stall those with one. Nil: no limit.
	TakeBody func(w http.ResponseWriter, r *http.Request) (release func(), err error)
	// KeysRequired says the server has API keys: the dashboard then asks
	// for one before anything else.
	KeysRequired bool
	// SearchNeighbors is the search's neighbors setting (the server's).
	SearchNeighbors int
	Logger          *slog.Logger
	// Now is the clock for "3 min ago"; time.Now when nil.
	Now func() time.Time
	// Version is the running build, shown in every page's footer.
	Version string
}

// Handler serves the dashboard.
type Handler struct {
	svc  *memory.Service
	opts Options
	mux  *http.ServeMux
	h    http.Handler
	// styleHash is the CSP hash of the stylesheet inlined in the login
	// page, the one page served before a key is given.
	styleHash string
	logins    *logins
}

//go:embed static
var staticFS embed.FS

// stylesheet is static/ui.css, inlined in the login page.
var stylesheet = mustRead("static/ui.css")

func mustRead(name string) string {
	b, err := fs.ReadFile(staticFS, name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// New builds the dashboard's routes on svc.
func New(svc *memory.Service, opts Options) *Handler {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	sum := sha256.Sum256([]byte(stylesheet))
	h := &Handler{svc: svc, opts: opts, mux: http.NewServeMux(), styleHash: "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'",
		logins: newLogins(opts.Now)}
	m := h.mux
	m.HandleFunc("GET /ui/login", h.loginPage)
	m.HandleFunc("POST /ui/login", h.login)
	m.HandleFunc("POST /ui/logout", h.logout)
	m.Handle("GET /ui/static/", h.admitted(h.static))
	m.Handle("POST /ui/tenant", h.admitted(h.pickTenant))
	m.Handle("GET /ui/{$}", h.admitted(h.sessionsPage))
	m.Handle("GET /ui/sessions/{id}", h.admitted(h.sessionPage))
	m.Handle("POST /ui/sessions/{id}/window", h.admitted(h.windowPreview))
	m.Handle("GET /ui/sessions/{id}/cold", h.admitted(h.coldPage))
	m.Handle("GET /ui/sessions/{id}/messages", h.admitted(h.messagesPage))
	m.Handle("GET /ui/sessions/{id}/tuning", h.admitted(h.sessionTuningPage))
	m.Handle("POST /ui/sessions/{id}/messages/{mid}/recover", h.admitted(h.recoverMessage))
	m.Handle("POST /ui/sessions/{id}/notes", h.admitted(h.addNote))
	m.Handle("POST /ui/messages/{mid}", h.admitted(h.editNote))
	m.Handle("GET /ui/tuning", h.admitted(h.tuningPage))
	m.Handle("GET /ui/search", h.admitted(h.searchPage))
	m.Handle("POST /ui/search", h.admitted(h.searchPage))
	m.Handle("/ui/", h.admitted(h.notFound))
	// A POST sent by another site's page (a form aimed at the recover
	// button, say) is refused before it reaches a handler: the browser
	// marks it with Sec-Fetch-Site or Origin. Same-site cookies alone
	// would let a sibling subdomain through.
	h.h = securityHeaders(http.NewCrossOriginProtection().Handler(m), h.styleHash)
	return h
}

// ServeHTTP serves everything under Prefix; "/ui" redirects to it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/ui" {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	h.h.ServeHTTP(w, r)
}

// securityHeaders: pages load only our own script and styles (an injected
// <script> would not run even if escaping failed somewhere), are never
// framed, and are not cached (they show stored content).
func securityHeaders(next http.Handler, styleHash string) http.Handler {
	csp := "default-src 'none'; script-src 'self'; style-src 'self' " + styleHash + "; img-src 'self' data:; " +
		"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) static(w http.ResponseWriter, r *http.Request) {
	http.StripPrefix("/ui/", http.FileServerFS(staticFS)).ServeHTTP(w, r)
}

// Favicon serves the dashboard's icon; the server answers /favicon.ico,
// which browsers ask for whatever the page links, with it. It needs no key.
func Favicon(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(staticFS, "static/favicon.svg")
	if err != nil {
		http.Error(w, "no icon", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Header().Set("Cache-Control", "public, max-age=86400")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	_, _ = w.Write(b)
}

func (h *Handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.fail(w, r, memory.Errorf(memory.ENOTFOUND, "no such page: %s", r.URL.Path))
}
