package server_test

import (
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// A refused edit or delete answers a 4xx in the API's error shape and
// changes nothing.
func TestEditAndDeleteRefusals(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("r", map[string]any{"context_window": 1200})
	ids := ts.store("r", api.MessageIn{Role: "system", Content: "rules", Pinned: true}, msg("user", "first question"))
	u := ids[1]
	v := ts.patch(u, map[string]any{"content": "first question, edited"}).Versions[0]
	chat(ts, "r", 60)
	var summary, source string
	for _, m := range ts.allMessages("r") {
		if m.Kind == "summary" && summary == "" {
			summary, source = m.ID, m.Sources[0]
		}
	}
	if summary == "" {
		t.Fatal("setup: no summary")
	}
	snap := ts.snapshot("r")
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code, says         string
	}{
		{"empty edit", "PATCH", "/v1/messages/" + u, `{}`, 400, "invalid_request", "nothing to change"},
		{"unknown field", "PATCH", "/v1/messages/" + u, `{"pined": true}`, 400, "invalid_request", "pined"},
		{"role", "PATCH", "/v1/messages/" + u, `{"role": "assistant"}`, 400, "invalid_request", "role"},
		{"tool_calls", "PATCH", "/v1/messages/" + u, `{"content": "x", "tool_calls": []}`, 400, "invalid_request", "tool_calls"},
		{"content a number", "PATCH", "/v1/messages/" + u, `{"content": 5}`, 400, "invalid_request", "content"},
		{"content null", "PATCH", "/v1/messages/" + u, `{"content": null}`, 400, "invalid_request", "content"},
		{"content empty", "PATCH", "/v1/messages/" + u, `{"content": "  "}`, 400, "invalid_request", "content"},
		{"content NUL", "PATCH", "/v1/messages/" + u, `{"content": "a\u0000b"}`, 400, "invalid_request", "NUL"},
		{"content too large", "PATCH", "/v1/messages/" + u, map[string]any{"content": strings.Repeat("a", 1<<20+1)}, 413, "too_large", "content"},
		{"pinned a string", "PATCH", "/v1/messages/" + u, `{"pinned": "yes"}`, 400, "invalid_request", "pinned"},
		{"metadata nested", "PATCH", "/v1/messages/" + u, `{"metadata": {"k": [1]}}`, 400, "invalid_request", "metadata"},
		{"metadata a list", "PATCH", "/v1/messages/" + u, `{"metadata": [1]}`, 400, "invalid_request", "metadata"},
		{"malformed", "PATCH", "/v1/messages/" + u, `{"content": "x"`, 400, "invalid_request", "JSON"},
		{"not an object", "PATCH", "/v1/messages/" + u, `["content"]`, 400, "invalid_request", "object"},
		{"no body", "PATCH", "/v1/messages/" + u, nil, 400, "invalid_request", "empty"},
		{"unknown id", "PATCH", "/v1/messages/01NOPE", `{"pinned": true}`, 404, "not_found", "01NOPE"},
		{"an earlier version", "PATCH", "/v1/messages/" + v, `{"content": "x"}`, 409, "conflict", u},
		{"a summary's content", "PATCH", "/v1/messages/" + summary, `{"content": "x"}`, 409, "conflict", "DELETE /v1/messages/" + summary},
		{"pin a cold message", "PATCH", "/v1/messages/" + source, `{"pinned": true}`, 409, "conflict", "recover it first"},
		{"delete unknown id", "DELETE", "/v1/messages/01NOPE", nil, 404, "not_found", "01NOPE"},
		{"delete group=maybe", "DELETE", "/v1/messages/" + u + "?group=maybe", nil, 400, "invalid_request", "group"},
		// The pinned budget's rules: memory's TestPinnedBudget.
		{"past the pinned budget", "POST", "/v1/sessions/r/messages", map[string]any{"messages": []any{map[string]any{"role": "assistant",
			"pinned": true, "content": strings.Repeat("NOTE: deploy with make ship after the freeze. ", 40)}}}, 409, "conflict", "pinned budget"},
		{"pinned_max_pct a string", "PUT", "/v1/sessions/r", `{"pinned_max_pct": "0.3"}`, 400, "invalid_request", "pinned_max_pct"},
		{"pinned_max_pct over 1", "PUT", "/v1/sessions/r", `{"pinned_max_pct": 1.5}`, 400, "invalid_request", "pinned_max_pct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.on(t).do(c.method, c.path, c.body)
			if e := r.errBody(); r.Status != c.status || e.Code != c.code || !strings.Contains(e.Message, c.says) {
				t.Fatalf("%s %s = %d %s, want %d %s saying %q", c.method, c.path, r.Status, r.Raw, c.status, c.code, c.says)
			}
		})
	}
	if got := ts.snapshot("r"); got != snap {
		t.Fatalf("refused requests changed the session:\nbefore %s\nafter  %s", snap, got)
	}
	// A summary's flags may change; deleting it leaves its sources cold
	// (dropped: no live summary covers them) and recoverable.
	ts.patch(summary, map[string]any{"important": true})
	ts.call(204, "DELETE", "/v1/messages/"+summary, nil, nil)
	ts.call(404, "GET", "/v1/messages/"+summary, nil, nil)
	if src := ts.message(source); src.State != memory.StateDropped {
		t.Fatalf("source of a deleted summary = %+v", src)
	}
	ts.call(200, "POST", "/v1/sessions/r/messages/"+source+"/recover", nil, nil)
	checkTotals(t, ts, "r")
}

// Another tenant's message id is 404 on both routes, exactly like GET, and
// its message is left as it was.
func TestEditAndDeleteTenantIsolation(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	a, b := ts.as(keyA), ts.as(keyB)
	id := a.store("s", msg("user", "tenant a's secret plan"))[0]
	b.store("s", msg("user", "tenant b's own message"))
	snap := a.snapshot("s")
	for _, r := range []resp{
		b.do("PATCH", "/v1/messages/"+id, map[string]any{"content": "overwritten by b"}),
		b.do("PATCH", "/v1/messages/"+id, map[string]any{"pinned": true}),
		b.do("DELETE", "/v1/messages/"+id, nil),
		b.do("DELETE", "/v1/messages/"+id+"?group=true", nil),
		b.do("GET", "/v1/messages/"+id, nil),
	} {
		if r.Status != 404 || r.errCode() != "not_found" {
			t.Fatalf("tenant b on tenant a's message: %d %s", r.Status, r.Raw)
		}
	}
	if got := a.snapshot("s"); got != snap {
		t.Fatalf("tenant b changed tenant a's session:\nbefore %s\nafter  %s", snap, got)
	}
	if evs := b.events("edits", "s"); len(evs) != 0 {
		t.Fatalf("tenant b's refused requests were logged as edits: %v", evs)
	}
	// The admin acting as tenant a may.
	admin := ts.as(keyAdmin, "a")
	admin.patch(id, map[string]any{"content": "edited by the admin for a"})
	admin.call(204, "DELETE", "/v1/messages/"+id, nil, nil)
	a.call(404, "GET", "/v1/messages/"+id, nil, nil)
	if got := b.search(api.SearchIn{Query: "own message"}); len(got) != 1 {
		t.Fatalf("tenant b's message after a's delete: %+v", got)
	}
}

// One message of a tool-call group is not deleted alone (409, nothing
// changes); ?group=true deletes the call with all its results, and the
// windows stay valid chat sequences.
func TestDeleteToolGroup(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	call := api.MessageIn{Role: "assistant", ToolCalls: []memory.ToolCall{
		{ID: "c1", Type: "function", Function: memory.FunctionCall{Name: "ls", Arguments: `{"dir":"/srv"}`}},
		{ID: "c2", Type: "function", Function: memory.FunctionCall{Name: "mkdir", Arguments: `{"dir":"/srv/new"}`}}}}
	ids := ts.store("g", msg("user", "list /srv and make /srv/new"), call,
		api.MessageIn{Role: "tool", ToolCallID: "c1", Content: "bin\netc\nwww"},
		api.MessageIn{Role: "tool", ToolCallID: "c2", Content: ""},
		msg("assistant", "Done: /srv holds bin, etc and www; /srv/new exists."))
	// An edited tool result keeps its earlier version cold, but that
	// version never goes back beside it: the call would have two results.
	v := ts.patch(ids[2], map[string]any{"content": "bin\netc\nwww\nlost+found"}).Versions[0]
	if r := ts.do("POST", "/v1/sessions/g/messages/"+v+"/recover", nil); r.Status != 409 || !strings.Contains(string(r.Raw), "GET /v1/messages/"+v) {
		t.Fatalf("recover an earlier version of a tool result = %d %s", r.Status, r.Raw)
	}
	snap := ts.snapshot("g")
	for _, id := range ids[1:4] {
		r := ts.do("DELETE", "/v1/messages/"+id, nil)
		text := r.errBody().Message
		if r.Status != 409 || r.errCode() != "conflict" || !strings.Contains(text, "group=true") || !strings.Contains(text, ids[1]) || !strings.Contains(text, ids[3]) {
			t.Fatalf("DELETE %s of a tool group = %d %s", id, r.Status, r.Raw)
		}
	}
	if got := ts.snapshot("g"); got != snap {
		t.Fatalf("a refused delete changed the session:\nbefore %s\nafter  %s", snap, got)
	}
	ts.call(204, "DELETE", "/v1/messages/"+ids[2]+"?group=true", nil, nil)
	for _, id := range append(ids[1:4:4], v) {
		ts.call(404, "GET", "/v1/messages/"+id, nil, nil)
	}
	for _, id := range []string{ids[0], ids[4]} {
		ts.message(id)
	}
	w := ts.context("g", "", api.ContextIn{Prompt: "what is in /srv?"})
	servertest.CheckSequence(t, w.Messages)
	if n := len(w.Messages); n != 2 {
		t.Fatalf("window has %d messages, want the 2 left", n)
	}
	checkTotals(t, ts, "g")
	// A message outside any group goes alone.
	ts.call(204, "DELETE", "/v1/messages/"+ids[4], nil, nil)
	checkTotals(t, ts, "g")
}
