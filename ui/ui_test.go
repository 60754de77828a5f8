package ui_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// Keys of the test server: tenants a and b, and an admin.
const (
	keyA     = "key-of-tenant-a-0123456789"
	keyB     = "key-of-tenant-b-0123456789"
	keyAdmin = "key-of-the-admin-0123456789"
)

// xss is message content that must reach the page as text.
const xss = `<script>alert("owned")</script><img src=x onerror=alert(1)>`

type env struct {
	h   *memorytest.Harness
	srv http.Handler
}

// newEnv serves a real service (bbolt, Bleve, event log) through the API
// server with three keys, with tenant a's session "s" compacted and
// holding a hostile message, and tenant b's session "theirs".
func newEnv(t *testing.T) *env {
	t.Helper()
	h := memorytest.Open(t, memorytest.WithEvents(t))
	keys, err := httpapi.ParseKeys("a:" + keyA + ",b:" + keyB + ",*:" + keyAdmin)
	if err != nil {
		t.Fatal(err)
	}
	e := &env{h: h, srv: httpapi.New(h.Service, httpapi.Options{Keys: keys, Logger: slog.New(slog.DiscardHandler)}).Handler()}
	a, b := tenant("a"), tenant("b")
	h.Compacted(t, a, "s")
	if _, err := h.Append(a, "s", []*memory.Message{{Role: memory.RoleUser, Content: xss, Pinned: true}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Append(b, "theirs", []*memory.Message{{Role: memory.RoleUser, Content: "tenant b's secret plan: orchid"}}); err != nil {
		t.Fatal(err)
	}
	return e
}

func tenant(name string) context.Context {
	return memory.NewContextWithTenant(context.Background(), name)
}

type resp struct {
	status int
	body   string
	header http.Header
}

// do sends one request with key as the API takes it (Bearer); form, when
// not nil, is the POST body.
func (e *env) do(t *testing.T, method, target, key string, form url.Values) resp {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req := httptest.NewRequest(method, target, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return e.serve(req)
}

func (e *env) serve(req *http.Request) resp {
	rec := httptest.NewRecorder()
	e.srv.ServeHTTP(rec, req)
	return resp{status: rec.Code, body: rec.Body.String(), header: rec.Header()}
}

func (e *env) coldID(t *testing.T, ctx context.Context, session string) string {
	t.Helper()
	cold, _, err := e.h.ListCold(ctx, session, "", 1, false)
	if err != nil || len(cold) == 0 {
		t.Fatalf("no cold message in %s: %v", session, err)
	}
	return cold[0].ID
}

func TestPages(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cold := e.coldID(t, tenant("a"), "s")
	cases := []struct {
		name, method, target string
		form                 url.Values
		status               int
		want                 []string // substrings of the body
	}{
		{"sessions", "GET", "/ui/", nil, 200, []string{`href="/ui/sessions/s"`, `class="gauge"`}},
		{"sessions sorted", "GET", "/ui/?sort=tokens&desc=1", nil, 200, []string{`href="/ui/sessions/s"`, "sessions match"}},
		{"sessions filtered out", "GET", "/ui/?q=nothing-like-it", nil, 200, []string{"No sessions match this filter."}},
		{"session", "GET", "/ui/sessions/s", nil, 200, []string{`class="chart"`, "Compactions", "Pinned notes", `aria-label="window tokens over time"`}},
		{"cold", "GET", "/ui/sessions/s/cold", nil, 200, []string{`id="m-` + cold, "Recover", "Recoverable until"}},
		{"messages", "GET", "/ui/sessions/s/messages", nil, 200, []string{"st-msg-summarized", "turn 0:"}},
		{"messages by state", "GET", "/ui/sessions/s/messages?state=dropped", nil, 200, []string{"st-msg-dropped"}},
		{"session tuning", "GET", "/ui/sessions/s/tuning", nil, 200, []string{"Drop scores against the relevance cutoff", `aria-label="drop scores"`, "cutoff 0.05"}},
		{"tuning", "GET", "/ui/tuning", nil, 200, []string{"all sessions of tenant a", "Summary compression"}},
		{"search form", "GET", "/ui/search", nil, 200, []string{`name="q"`}},
		{"search", "POST", "/ui/search", url.Values{"q": {"zebrafish"}, "mode": {"text"}}, 200, []string{"<mark>zebrafish</mark>"}},
		{"window page", "POST", "/ui/sessions/s/window", url.Values{"prompt": {"what is the zebrafish vault on?"}}, 200, []string{"would recover", "src-recovered", "src-pinned"}},
		{"static css", "GET", "/ui/static/ui.css", nil, 200, []string{".gauge"}},
		{"static js", "GET", "/ui/static/ui.js", nil, 200, []string{"X-Ctxd-Fragment"}},
		{"ui redirects", "GET", "/ui", nil, 301, nil},
		{"ENOTFOUND session", "GET", "/ui/sessions/nope", nil, 404, []string{"not_found"}},
		{"ENOTFOUND page", "GET", "/ui/nowhere", nil, 404, []string{"no such page"}},
		{"EINVALID session id", "GET", "/ui/sessions/.hidden", nil, 400, []string{"invalid_request"}},
		{"EINVALID sort", "GET", "/ui/?sort=colour", nil, 400, []string{"sort: &#34;colour&#34;"}},
		{"EINVALID cursor", "GET", "/ui/sessions/s/cold?cursor=zz", nil, 400, []string{"cursor"}},
		{"cold newest first", "GET", "/ui/sessions/s/cold", nil, 200, []string{"newest first (", `href="/ui/sessions/s/cold?order=oldest"`}},
		{"cold oldest first", "GET", "/ui/sessions/s/cold?order=oldest", nil, 200, []string{"oldest first (", `href="/ui/sessions/s/cold">newest first`}},
		{"EINVALID order", "GET", "/ui/sessions/s/cold?order=zz", nil, 400, []string{"order"}},
		{"EINVALID limit", "GET", "/ui/sessions/s/messages?limit=100000", nil, 400, []string{"limit"}},
		{"EINVALID state", "GET", "/ui/sessions/s/messages?state=asleep", nil, 400, []string{"state"}},
		{"EINVALID max tokens", "POST", "/ui/sessions/s/window", url.Values{"max_tokens": {"lots"}}, 400, []string{"max_tokens"}},
		{"EINVALID search", "POST", "/ui/search", url.Values{"q": {" "}}, 400, []string{"query"}},
		{"EINVALID search mode", "POST", "/ui/search", url.Values{"q": {"x"}, "mode": {"psychic"}}, 400, []string{"mode"}},
		{"EFORBIDDEN tenant pick", "POST", "/ui/tenant", url.Values{"tenant": {"b"}}, 403, []string{"admin"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(t, c.method, c.target, keyA, c.form)
			if r.status != c.status {
				t.Fatalf("%s %s: status %d, want %d: %.400s", c.method, c.target, r.status, c.status, r.body)
			}
			for _, w := range c.want {
				if !strings.Contains(r.body, w) {
					t.Errorf("%s %s: body lacks %q: %.2000s", c.method, c.target, w, r.body)
				}
			}
			if csp := r.header.Get("Content-Security-Policy"); r.status != 301 && !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("CSP %q", csp)
			}
		})
	}
}

// Message content is untrusted: every page that shows it shows it as text.
func TestContentIsEscaped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	escaped := "&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
	for _, c := range []struct {
		method, target string
		form           url.Values
		want           string
	}{
		{"GET", "/ui/sessions/s", nil, escaped},                                 // the pinned notes
		{"GET", "/ui/sessions/s/messages?limit=200", nil, escaped},              // every message
		{"POST", "/ui/sessions/s/window", url.Values{"prompt": {xss}}, escaped}, // the window, and the prompt typed
		{"POST", "/ui/search", url.Values{"q": {"owned alert script"}, "mode": {"text"}},
			"&lt;<mark>script</mark>&gt;<mark>alert</mark>(&#34;<mark>owned</mark>&#34;)"}, // the highlighted snippet
	} {
		r := e.do(t, c.method, c.target, keyA, c.form)
		if r.status != 200 {
			t.Fatalf("%s %s: %d %.300s", c.method, c.target, r.status, r.body)
		}
		if strings.Contains(r.body, "<script>alert") || strings.Contains(r.body, "<img src=x") {
			t.Errorf("%s %s: the message's markup is in the page as markup", c.method, c.target)
		}
		if !strings.Contains(r.body, c.want) {
			t.Errorf("%s %s: the message is not on the page as text", c.method, c.target)
		}
	}
}

func TestNothingWithoutAKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cold := e.coldID(t, tenant("a"), "s")
	for _, c := range []struct{ method, target string }{
		{"GET", "/ui/"}, {"GET", "/ui/sessions/s"}, {"GET", "/ui/sessions/s/cold"}, {"GET", "/ui/sessions/s/messages"},
		{"GET", "/ui/sessions/s/tuning"}, {"GET", "/ui/tuning"}, {"GET", "/ui/search"}, {"GET", "/ui/static/ui.js"},
		{"GET", "/ui/static/ui.css"}, {"GET", "/ui/nowhere"},
		{"POST", "/ui/search"}, {"POST", "/ui/sessions/s/window"}, {"POST", "/ui/sessions/s/messages/" + cold + "/recover"},
		{"POST", "/ui/sessions/s/notes"}, {"POST", "/ui/messages/" + cold}, {"POST", "/ui/tenant"},
	} {
		for _, key := range []string{"", "not-a-key-of-this-server"} {
			r := e.do(t, c.method, c.target, key, url.Values{"q": {"zebrafish"}, "content": {"x"}})
			switch {
			// A page asked for without a working key (none, or a cookie
			// of a key since removed) sends the browser to log in.
			case c.method == "GET" && r.status == http.StatusSeeOther:
				if loc := r.header.Get("Location"); loc != "/ui/login?next="+url.QueryEscape(c.target) {
					t.Errorf("%s %s: redirected to %q", c.method, c.target, loc)
				}
			case r.status == http.StatusUnauthorized:
			default:
				t.Errorf("%s %s with key %q: status %d: %.300s", c.method, c.target, key, r.status, r.body)
			}
			if strings.Contains(r.body, "zebrafish") || strings.Contains(r.body, "turn 5") {
				t.Errorf("%s %s: stored content in an answer without a key", c.method, c.target)
			}
		}
	}
	if msgs, _, _ := e.h.ListMessages(tenant("a"), "s", []string{"recovered"}, "", 10); len(msgs) != 0 {
		t.Fatalf("a request without a key recovered %d messages", len(msgs))
	}
	// The login page is the one page served before a key.
	r := e.do(t, "GET", "/ui/login?next=/ui/sessions/s", "", nil)
	if r.status != 200 || !strings.Contains(r.body, `name="key"`) || !strings.Contains(r.body, `value="/ui/sessions/s"`) {
		t.Fatalf("login page: %d %.500s", r.status, r.body)
	}
	if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "'sha256-") {
		t.Fatalf("login page CSP %q has no hash for its inline stylesheet", csp)
	}
}

// A login is a server-side token in a session cookie: the cookie never
// holds the key (in any encoding), and logging out revokes the token, so
// a copy of the cookie kept after logout opens nothing.
func TestLoginKeepsATokenInASessionCookie(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	login := func(key, next string) resp {
		return e.do(t, "POST", "/ui/login", "", url.Values{"key": {key}, "next": {next}})
	}
	r := login(keyA, "/ui/sessions/s")
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/sessions/s" {
		t.Fatalf("login: %d to %q", r.status, r.header.Get("Location"))
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "ctxd_login" && c.Value != "" {
			cookie = c
		}
	}
	if cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteLaxMode || cookie.Path != "/ui/" || cookie.MaxAge != 0 || !cookie.Expires.IsZero() {
		t.Fatalf("key cookie %+v: want HttpOnly, SameSite=Lax, Path=/ui/, no expiry", cookie)
	}
	if strings.Contains(cookie.Value, keyA) || strings.Contains(cookie.Value, base64.RawURLEncoding.EncodeToString([]byte(keyA))) {
		t.Fatalf("the cookie %q holds the key", cookie.Value)
	}
	req := httptest.NewRequest("GET", "/ui/sessions/s", nil)
	req.AddCookie(cookie)
	if got := e.serve(req); got.status != 200 || !strings.Contains(got.body, "Window over time") {
		t.Fatalf("session page with the cookie: %d", got.status)
	}
	for _, c := range []struct {
		name, key, next string
		status          int
		location        string
	}{
		{"EUNAUTHORIZED", "wrong-key-0123456789", "/ui/", http.StatusUnauthorized, ""},
		{"EINVALID empty", "", "/ui/", http.StatusBadRequest, ""},
		{"OK open redirect refused", keyA, "//evil.example/", http.StatusSeeOther, "/ui/"},
		{"OK other site refused", keyA, "https://evil.example/ui/", http.StatusSeeOther, "/ui/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := login(c.key, c.next)
			if r.status != c.status || r.header.Get("Location") != c.location {
				t.Fatalf("status %d to %q, want %d to %q", r.status, r.header.Get("Location"), c.status, c.location)
			}
		})
	}
	// A POST from another site's page is refused, cookie or not.
	cold := e.coldID(t, tenant("a"), "s")
	req = httptest.NewRequest("POST", "/ui/sessions/s/messages/"+cold+"/recover", nil)
	req.AddCookie(cookie)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if got := e.serve(req); got.status != http.StatusForbidden {
		t.Fatalf("cross-site recover: %d, want 403", got.status)
	}
	req = httptest.NewRequest("POST", "/ui/login", strings.NewReader("key="+keyB))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	if got := e.serve(req); got.status != http.StatusForbidden {
		t.Fatalf("cross-origin login: %d, want 403", got.status)
	}
	if m, err := e.h.Message(tenant("a"), cold); err != nil || m.InWindow() {
		t.Fatalf("after a cross-site recover the message is %v (%v)", m.State, err)
	}
	req = httptest.NewRequest("POST", "/ui/logout", strings.NewReader(""))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(cookie)
	r = e.serve(req)
	if r.status != http.StatusSeeOther || !strings.Contains(strings.Join(r.header.Values("Set-Cookie"), "\n"), "ctxd_login=; Path=/ui/; Max-Age=0") {
		t.Fatalf("logout: %d %v", r.status, r.header.Values("Set-Cookie"))
	}
	// The browser forgets the cookie; a copy of it is refused.
	req = httptest.NewRequest("GET", "/ui/sessions/s", nil)
	req.AddCookie(cookie)
	if got := e.serve(req); got.status != http.StatusSeeOther || !strings.HasPrefix(got.header.Get("Location"), "/ui/login") {
		t.Fatalf("session page with the cookie after logout: %d to %q, want the login page", got.status, got.header.Get("Location"))
	}
	// A cookie made up from the key, as the dashboard once set it, opens nothing.
	req = httptest.NewRequest("GET", "/ui/sessions/s", nil)
	req.AddCookie(&http.Cookie{Name: "ctxd_login", Value: base64.RawURLEncoding.EncodeToString([]byte(keyA))})
	req.AddCookie(&http.Cookie{Name: "ctxd_key", Value: base64.RawURLEncoding.EncodeToString([]byte(keyA))})
	if got := e.serve(req); got.status != http.StatusSeeOther {
		t.Fatalf("session page with the key as cookie: %d, want the login page", got.status)
	}
}

// Key a cannot see or change anything of tenant b through the dashboard.
func TestTenantIsolation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	b := tenant("b")
	e.h.Compacted(t, b, "b-long")
	coldB := e.coldID(t, b, "b-long")
	for _, target := range []string{"/ui/sessions/theirs", "/ui/sessions/b-long/cold", "/ui/sessions/b-long/messages",
		"/ui/sessions/b-long/tuning"} {
		if r := e.do(t, "GET", target, keyA, nil); r.status != http.StatusNotFound || strings.Contains(r.body, "orchid") {
			t.Errorf("GET %s with a's key: %d", target, r.status)
		}
	}
	list := e.do(t, "GET", "/ui/?limit=200", keyA, nil)
	if strings.Contains(list.body, "theirs") || strings.Contains(list.body, "b-long") {
		t.Error("a's session list names b's sessions")
	}
	tuning := e.do(t, "GET", "/ui/tuning", keyA, nil)
	all := e.do(t, "GET", "/ui/tuning", keyB, nil)
	if tuning.body == all.body || !strings.Contains(all.body, "tenant b") {
		t.Error("tuning is not per tenant")
	}
	for _, c := range []struct {
		target string
		form   url.Values
	}{
		{"/ui/sessions/b-long/messages/" + coldB + "/recover", url.Values{}},
		{"/ui/sessions/s/messages/" + coldB + "/recover", url.Values{}}, // b's message under a's session
		{"/ui/messages/" + coldB, url.Values{"content": {"a was here"}}},
		{"/ui/sessions/theirs/window", url.Values{"prompt": {"orchid"}}},
		{"/ui/sessions/theirs/notes", url.Values{"content": {"a was here"}}},
	} {
		if r := e.do(t, "POST", c.target, keyA, c.form); r.status != http.StatusNotFound || strings.Contains(r.body, "orchid") {
			t.Errorf("POST %s with a's key: %d %.200s", c.target, r.status, r.body)
		}
	}
	if m, err := e.h.Message(b, coldB); err != nil || m.InWindow() || strings.Contains(m.Content, "a was here") {
		t.Fatalf("b's message after a's attempts: %+v %v", m, err)
	}
	search := e.do(t, "POST", "/ui/search", keyA, url.Values{"q": {"orchid secret plan"}})
	if search.status != 200 || strings.Contains(search.body, "/ui/sessions/theirs") || strings.Contains(search.body, "plan: orchid") {
		t.Fatalf("a's search finds b's message: %d", search.status)
	}
	// An admin key may act as b; b's own key may not act as a.
	admin := httptest.NewRequest("POST", "/ui/tenant", strings.NewReader("tenant=b"))
	admin.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	admin.Header.Set("Authorization", "Bearer "+keyAdmin)
	r := e.serve(admin)
	if r.status != http.StatusSeeOther {
		t.Fatalf("admin picks tenant b: %d %.300s", r.status, r.body)
	}
	var pick *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "ctxd_tenant" {
			pick = c
		}
	}
	req := httptest.NewRequest("GET", "/ui/sessions/theirs/messages", nil)
	req.Header.Set("Authorization", "Bearer "+keyAdmin)
	req.AddCookie(pick)
	if got := e.serve(req); got.status != 200 || !strings.Contains(got.body, "orchid") {
		t.Fatalf("admin acting as b: %d", got.status)
	}
	req = httptest.NewRequest("GET", "/ui/", nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.AddCookie(&http.Cookie{Name: "ctxd_tenant", Value: "b"})
	if got := e.serve(req); got.status != http.StatusForbidden {
		t.Fatalf("a's key with a tenant cookie for b: %d, want 403", got.status)
	}
}

func TestRecoverButton(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := tenant("a")
	cold := e.coldID(t, a, "s")
	target := "/ui/sessions/s/messages/" + cold + "/recover"
	// Without script: the form posts, and the page it came from comes back.
	r := e.do(t, "POST", target, keyA, url.Values{"back": {"/ui/sessions/s/cold?limit=20"}})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/ui/sessions/s/cold?flash=recovered&limit=20" {
		t.Fatalf("recover: %d to %q", r.status, r.header.Get("Location"))
	}
	if m, err := e.h.Message(a, cold); err != nil || m.State != memory.StateRecovered {
		t.Fatalf("after recover: %v %v", m.State, err)
	}
	page := e.do(t, "GET", r.header.Get("Location"), keyA, nil)
	if !strings.Contains(page.body, "Recovered: the message is back") {
		t.Fatal("no note that the message came back")
	}
	// With script: the row comes back as a fragment, in its new state.
	other := e.coldID(t, a, "s")
	req := httptest.NewRequest("POST", "/ui/sessions/s/messages/"+other+"/recover", nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("X-Ctxd-Fragment", "1")
	frag := e.serve(req)
	if frag.status != 200 || !strings.HasPrefix(frag.body, `<tr class="row" id="m-`+other+`" data-state="recovered"`) || strings.Contains(frag.body, "<html") {
		t.Fatalf("fragment: %d %.300s", frag.status, frag.body)
	}
	// A fragment's error is the API's JSON error.
	req = httptest.NewRequest("POST", "/ui/sessions/s/messages/NOPE/recover", nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	req.Header.Set("X-Ctxd-Fragment", "1")
	if bad := e.serve(req); bad.status != 404 || !strings.Contains(bad.body, `"code":"not_found"`) {
		t.Fatalf("fragment error: %d %s", bad.status, bad.body)
	}
	// Off-site "back" goes to the session's cold page instead.
	third := e.coldID(t, a, "s")
	r = e.do(t, "POST", "/ui/sessions/s/messages/"+third+"/recover", keyA, url.Values{"back": {"https://evil.example/"}})
	if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/ui/") {
		t.Fatalf("back to %q", loc)
	}
}

func TestPinnedNotes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	a := tenant("a")
	r := e.do(t, "POST", "/ui/sessions/s/notes", keyA, url.Values{"content": {"deploys go through the blue pipeline"}, "role": {"system"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("add note: %d %.300s", r.status, r.body)
	}
	notes, err := e.h.PinnedMessages(a, "s")
	if err != nil {
		t.Fatal(err)
	}
	var id string
	for _, n := range notes {
		if n.Content == "deploys go through the blue pipeline" && n.Role == memory.RoleSystem {
			id = n.ID
		}
	}
	if id == "" {
		t.Fatalf("the note is not pinned in s: %d notes", len(notes))
	}
	page := e.do(t, "GET", "/ui/sessions/s", keyA, nil)
	if !strings.Contains(page.body, `action="/ui/messages/`+id+`"`) {
		t.Fatal("the session page has no edit form for the note")
	}
	r = e.do(t, "POST", "/ui/messages/"+id, keyA, url.Values{"content": {"deploys go through the green pipeline"}, "pinned": {"on"}})
	if r.status != http.StatusSeeOther {
		t.Fatalf("edit note: %d %.300s", r.status, r.body)
	}
	m, err := e.h.Message(a, id)
	if err != nil || m.Content != "deploys go through the green pipeline" || !m.Pinned || len(m.Versions) != 1 {
		t.Fatalf("edited note: %+v %v", m, err)
	}
	// Unticked, the note is unpinned.
	if r = e.do(t, "POST", "/ui/messages/"+id, keyA, url.Values{"content": {m.Content}}); r.status != http.StatusSeeOther {
		t.Fatalf("unpin: %d", r.status)
	}
	if m, _ = e.h.Message(a, id); m.Pinned {
		t.Fatal("the note is still pinned")
	}
	for _, bad := range []url.Values{{"content": {""}}, {"content": {"x"}, "role": {"wizard"}}} {
		if r := e.do(t, "POST", "/ui/sessions/s/notes", keyA, bad); r.status != http.StatusBadRequest {
			t.Errorf("add note %v: %d", bad, r.status)
		}
	}
	if r := e.do(t, "POST", "/ui/sessions/nope/notes", keyA, url.Values{"content": {"x"}}); r.status != http.StatusNotFound {
		t.Errorf("note for a missing session: %d", r.status)
	}
}

var rowRE = regexp.MustCompile(`<tr class="row"`)

// Pages hold one page of rows, however many there are.
func TestPagination(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := tenant("many")
	const n = 1200
	for i := range n {
		window := 1000 + i%7*100 // tokens are 0: the window orders the pct sort
		if _, err := e.h.PutSession(c, fmt.Sprintf("m-%05d", i), memory.SessionUpdate{ContextWindow: &window}); err != nil {
			t.Fatal(err)
		}
	}
	keys, err := httpapi.ParseKeys("many:key-of-tenant-many-012345")
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.New(e.h.Service, httpapi.Options{Keys: keys, Logger: slog.New(slog.DiscardHandler)}).Handler()
	get := func(target string) string {
		req := httptest.NewRequest("GET", target, nil)
		req.Header.Set("Authorization", "Bearer key-of-tenant-many-012345")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("GET %s: %d %.300s", target, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	next := regexp.MustCompile(`href="([^"]+)" rel="next"`)
	for _, start := range []string{"/ui/", "/ui/?sort=updated_at&desc=1", "/ui/?q=m-001&sort=pct_used"} {
		seen := map[string]bool{}
		target := start
		for pages := 0; target != ""; pages++ {
			body := get(target)
			rows := len(rowRE.FindAllString(body, -1))
			if rows > 50 {
				t.Fatalf("%s: %d rows on one page", target, rows)
			}
			for _, m := range regexp.MustCompile(`href="/ui/sessions/(m-\d+)"`).FindAllStringSubmatch(body, -1) {
				if seen[m[1]] {
					t.Fatalf("%s: %s on two pages", start, m[1])
				}
				seen[m[1]] = true
			}
			target = ""
			if m := next.FindStringSubmatch(body); m != nil {
				target = strings.ReplaceAll(m[1], "&amp;", "&")
			}
			if pages > n/50+2 {
				t.Fatalf("%s: pages never end", start)
			}
		}
		want := n
		if strings.Contains(start, "q=m-001") {
			want = 100 // m-00100 to m-00199
		}
		if len(seen) != want {
			t.Fatalf("%s: %d sessions over all pages, want %d", start, len(seen), want)
		}
	}
	// A long session's messages and cold pages are pages too.
	a := tenant("a")
	st, err := e.h.GetSession(a, "s")
	if err != nil {
		t.Fatal(err)
	}
	body := e.do(t, "GET", "/ui/sessions/s/messages?limit=10", keyA, nil).body
	if rows := len(rowRE.FindAllString(body, -1)); rows != 10 || !next.MatchString(body) {
		t.Fatalf("messages page: %d rows of %d messages, next link %v", rows, st.Messages.Active, next.MatchString(body))
	}
	body = e.do(t, "GET", "/ui/sessions/s/cold?limit=5", keyA, nil).body
	if rows := len(rowRE.FindAllString(body, -1)); rows != 5 || !next.MatchString(body) {
		t.Fatalf("cold page: %d rows", rows)
	}
}

// A search result links to the messages page that holds the match, deep
// in a long session.
func TestSearchResultOpensItsPage(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var msgs []*memory.Message
	for i := range 150 {
		text := fmt.Sprintf("routine build log line %d", i)
		if i == 120 {
			text = "the kumquat migration finished"
		}
		msgs = append(msgs, &memory.Message{Role: memory.RoleUser, Content: text})
	}
	res, err := e.h.Append(tenant("a"), "long", msgs)
	if err != nil {
		t.Fatal(err)
	}
	id := res.IDs[120]
	found := e.do(t, "POST", "/ui/search", keyA, url.Values{"q": {"kumquat"}, "mode": {"text"}})
	m := regexp.MustCompile(`href="(/ui/sessions/long/messages\?[^"#]*)#m-` + regexp.QuoteMeta(id) + `"`).FindStringSubmatch(found.body)
	if found.status != 200 || m == nil {
		t.Fatalf("search: %d, no link to message %s:\n%s", found.status, id, found.body)
	}
	page := e.do(t, "GET", html.UnescapeString(m[1]), keyA, nil)
	if page.status != 200 || !strings.Contains(page.body, `id="m-`+id+`"`) {
		t.Fatalf("%s: %d, without message %s", m[1], page.status, id)
	}
}
