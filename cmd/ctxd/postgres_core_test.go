package main

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// TestCoreOnPostgres runs the core of the HTTP suite again with its
// servers on PostgreSQL (servertest.PostgresFor reads the test's name): edits with a
// restart and the offline verify, MCP over HTTP and the dashboard's pages
// (internal/server's runs the sessions, messages, context, search,
// compaction, idempotency and gateway ones). A subset, to keep `make test` short: the rest of the suite is
// the same code above the memory.Store both backends pass the contract of.
func TestCoreOnPostgres(t *testing.T) {
	t.Parallel()
	pgtest.DSN(t) // skips (or fails, in CI) here when there is no server
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"EditMessageContent", TestEditMessageContent},
		{"DeleteMessage", TestDeleteMessage},
		{"MCPOverHTTP", TestMCPOverHTTP},
		{"GetMessageByID", TestGetMessageByID},
		{"Dashboard", testDashboardPages},
	} {
		t.Run(c.name, c.fn)
	}
}

// storeFlag is the --store of an admin verb on dir: the data dir of a
// server on PostgreSQL holds its index, not its store.
func storeFlag(dir string) []string {
	if dsn, ok := servertest.OnPostgres(dir); ok {
		return []string{"--store", dsn}
	}
	return nil
}

// testDashboardPages: the dashboard lists a session, shows its messages,
// stores a pinned note from its form and finds it in search.
func testDashboardPages(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("dash-1", msg("user", "The kiln in building seven fires on Thursdays."), msg("assistant", "Noted."))
	page := func(method, path string, form url.Values) string {
		t.Helper()
		var body io.Reader
		if form != nil {
			body = strings.NewReader(form.Encode())
		}
		req, err := http.NewRequest(method, ts.URL+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if form != nil {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s %s: %d\n%s", method, path, res.StatusCode, b)
		}
		return string(b)
	}
	if p := page("GET", "/ui/", nil); !strings.Contains(p, "dash-1") {
		t.Fatalf("the sessions page does not list dash-1:\n%s", p)
	}
	if p := page("GET", "/ui/sessions/dash-1/messages", nil); !strings.Contains(p, "kiln in building seven") {
		t.Fatalf("the session page does not show its message:\n%s", p)
	}
	page("POST", "/ui/sessions/dash-1/notes", url.Values{"content": {"Glaze orders go through Priya."}})
	if p := page("GET", "/ui/sessions/dash-1/messages", nil); !strings.Contains(p, "Glaze orders go through Priya.") {
		t.Fatalf("the note stored from the form is not on the session page:\n%s", p)
	}
	if p := page("GET", "/ui/search?q=kiln+thursdays", nil); !strings.Contains(p, "<mark>kiln</mark> in building seven") {
		t.Fatalf("dashboard search does not find the message:\n%s", p[strings.Index(p, "<main"):])
	}
}
