package ui_test

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/memory"
)

// A search is a URL (GET /ui/search?q=...) that can be bookmarked, its words
// are not written to the request log, and the versions of an edited note
// that match fold into one result.
func TestSearchByURLGroupsVersions(t *testing.T) {
	e := newEnv(t)
	a := tenant("a")
	res, err := e.h.Append(a, "notes", []*memory.Message{{Role: memory.RoleSystem, Content: "the quokka budget is 10 dollars", Pinned: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"the quokka budget is 12 dollars", "the quokka budget is 15 dollars", "the quokka budget is 20 dollars"} {
		if _, err := e.h.EditMessage(a, res.IDs[0], memory.MessageEdit{Content: &v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.h.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, "GET", "/ui/search?"+url.Values{"q": {"quokka budget"}, "mode": {"text"}}.Encode(), keyA, nil)
	if r.status != 200 || strings.Count(r.body, `<tr class="row">`) != 1 || !strings.Contains(r.body, "+3 other versions") {
		t.Errorf("search by URL: %d, %d rows:\n%s", r.status, strings.Count(r.body, `<tr class="row">`), r.body)
	}
	if !strings.Contains(r.body, `<form method="get" action="/ui/search"`) || !strings.Contains(r.body, `value="quokka budget"`) {
		t.Error("the search form does not submit to a URL, or does not keep the query")
	}

	var log bytes.Buffer
	logged := httpapi.New(e.h.Service, httpapi.Options{Logger: slog.New(slog.NewTextHandler(&log, nil))}).Handler()
	rec := httptest.NewRecorder()
	logged.ServeHTTP(rec, httptest.NewRequest("GET", "/ui/search?q=quokka+budget&mode=text", nil))
	if rec.Code != 200 || strings.Contains(log.String(), "quokka") || !strings.Contains(log.String(), "q=REDACTED") {
		t.Errorf("status %d; the request log holds the search's words:\n%s", rec.Code, log.String())
	}
}

// A note added from the dashboard is a system note by default, as
// memory_save's pinned notes are; /favicon.ico is an icon, not a 404.
func TestNoteRoleAndFavicon(t *testing.T) {
	e := newEnv(t)
	r := e.do(t, "POST", "/ui/sessions/s/notes", keyA, url.Values{"content": {"deploys freeze on the 30th"}})
	if r.status >= 400 {
		t.Fatalf("add note: %d %s", r.status, r.body)
	}
	msgs, _, err := e.h.ListMessages(tenant("a"), "s", nil, "", 1000)
	if err != nil {
		t.Fatal(err)
	}
	var role memory.Role
	for _, m := range msgs {
		if m.Content == "deploys freeze on the 30th" {
			role = m.Role
		}
	}
	if role != memory.RoleSystem {
		t.Errorf("the note's role is %q, want system", role)
	}
	if r := e.do(t, "GET", "/favicon.ico", "", nil); r.status != 200 || r.header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(r.body, "<svg") {
		t.Errorf("/favicon.ico: %d %s", r.status, r.header.Get("Content-Type"))
	}
}
