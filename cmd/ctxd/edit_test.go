package main

import (
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// checkTotals asserts the session's status agrees with its messages (counts,
// summaries, no id twice), that each message's tokens are its exact cost,
// and that the status's tokens are the sum over the working window (the
// sessions here hold no tool output long enough to be pruned). It returns
// the messages and what the pinned and system ones in the window cost.
func checkTotals(t *testing.T, ts *testServer, session string) ([]api.Message, int) {
	t.Helper()
	msgs := checkCounters(t, ts, session)
	return msgs, servertest.CheckTokens(t, servertest.Status(t, ts.URL, ts.Header, session), msgs)
}

// chat stores n turns of chatter, alternating user and assistant, four to a
// write: enough writes to compact, fewer requests than one per turn.
func chat(ts *testServer, session string, n int) {
	ts.t.Helper()
	for i := 0; i < n; i += 4 {
		var batch []map[string]any
		for j := i; j < min(i+4, n); j++ {
			batch = append(batch, msg([]string{"user", "assistant"}[j%2], chatter(j)))
		}
		ts.store(session, batch...)
	}
}

// mustVerify runs `ctxd verify` on a stopped server's data dir: the index,
// the vectors and the cold mirror agree with the store.
func mustVerify(t *testing.T, dir string) {
	t.Helper()
	if out := mustRun(t, append([]string{"verify", "--data-dir", dir}, storeFlag(dir)...)...); !strings.Contains(out, "consistent") {
		t.Fatalf("verify: %s", out)
	}
}

// patch is PATCH /v1/messages/{id}, wanting 200.
func (ts *testServer) patch(id string, p any) *api.Message {
	ts.t.Helper()
	var m api.Message
	ts.call(200, "PATCH", "/v1/messages/"+id, p, &m)
	return &m
}

func textSearch(ts *testServer, session, query string) []api.SearchResult {
	return ts.search(map[string]any{"query": query, "session_id": session, "mode": "text", "k": 20})
}

// An edit over the wire, then what the cold mirror, a restart and the
// offline `ctxd verify` find of it: the earlier versions kept (in the
// mirror too), the index following the edit, the totals exact. The edit's
// own rules (versions, retention, the event log, the window, tokens) are
// memory's TestEditMessageContent; its refusals internal/server's.
func TestEditMessageContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir, thirtyDays)
	ids := ts.store("e",
		map[string]any{"role": "system", "content": "You are a deployment assistant.", "pinned": true},
		map[string]any{"role": "user", "content": "The staging database password rotates every Friday.", "metadata": map[string]any{"src": "chat"}},
		msg("assistant", "Noted: the password rotates weekly."))
	u := ids[1]
	got := ts.patch(u, map[string]any{"content": "The staging database password rotates every Monday at noon, after the backup window."})
	if len(got.Versions) != 1 {
		t.Fatalf("edited message lists versions %v, want one", got.Versions)
	}
	v := got.Versions[0]
	if b, err := readColdFile(coldFile(dir, "e")); servertest.HasMirror(dir) && (err != nil || !strings.Contains(string(b), v) || !strings.Contains(string(b), `"version_of":"`+u)) {
		t.Fatalf("cold mirror lacks the earlier version: %v %s", err, b)
	}
	third := ts.patch(u, map[string]any{"content": "It rotates on the first of the month.",
		"important": true, "metadata": map[string]any{"src": "chat", "n": 2}})
	if vs := third.Versions; len(vs) != 2 || vs[0] != v || !third.Important || third.Metadata["n"] != 2.0 {
		t.Fatalf("after a second edit = %+v", third)
	}
	checkTotals(t, ts, "e")

	ts.Stop()
	ts = startServer(t, dir)
	after := ts.message(u)
	if after.Content != "It rotates on the first of the month." || len(after.Versions) != 2 {
		t.Fatalf("after restart = %+v", after)
	}
	if hits := idsOf(textSearch(ts, "e", "first month")); len(hits) == 0 || hits[0] != u {
		t.Fatalf("after restart the new words find %v", hits)
	}
	if hits := textSearch(ts, "e", "Friday"); len(hits) != 1 || hits[0].ID != v || hits[0].State != memory.StateDropped {
		t.Fatalf("after restart the old words find %v, want only the earlier version %s", idsOf(hits), v)
	}
	checkTotals(t, ts, "e")
	ts.Stop()
	mustVerify(t, dir)
}

// A deleted message leaves the store, both indexes and the cold mirror,
// with its earlier versions; the totals stay exact; a restart and the
// offline verify find it gone (its rules in the service: memory's
// TestDeleteMessage).
func TestDeleteMessage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.mustDo(200, "PUT", "/v1/sessions/d", map[string]any{"context_window": 1500})
	ids := ts.store("d",
		map[string]any{"role": "system", "content": "You are terse.", "pinned": true},
		msg("user", "My locker code is 4471 and the locker is by the okapi enclosure."),
		msg("assistant", "I will remember the okapi locker."))
	secret := ids[1]
	v := ts.patch(secret, map[string]any{"content": "My locker code is 9902, by the okapi enclosure."}).Versions[0]
	// Enough chatter to compact: some early turns go cold and into the mirror.
	chat(ts, "d", 50)
	var cold string
	for _, m := range allMessages(ts, "d") {
		if m.State == memory.StateDropped && m.Kind != memory.KindVersion && cold == "" {
			cold = m.ID
		}
	}
	if cold == "" {
		t.Fatal("setup: nothing dropped")
	}
	coldText := ts.message(cold).Content

	ts.mustDo(204, "DELETE", "/v1/messages/"+secret, nil)
	ts.mustDo(204, "DELETE", "/v1/messages/"+cold, nil)
	for _, id := range []string{secret, v, cold} {
		ts.mustDo(404, "GET", "/v1/messages/"+id, nil)
	}
	ts.mustDo(404, "DELETE", "/v1/messages/"+secret, nil)
	gone := func(ts *testServer) {
		t.Helper()
		for _, q := range []string{"okapi locker code", "4471", "9902"} {
			for _, h := range ts.search(map[string]any{"query": q, "session_id": "d", "k": 50}) {
				if h.ID == secret || h.ID == v {
					t.Fatalf("search %q still finds deleted %s", q, h.ID)
				}
			}
		}
		for _, h := range ts.search(map[string]any{"query": coldText, "session_id": "d", "k": 50}) {
			if h.ID == cold {
				t.Fatalf("search still finds deleted cold message %s", cold)
			}
		}
		b, err := readColdFile(coldFile(dir, "d"))
		if !servertest.HasMirror(dir) {
			b, err = nil, nil // none on PostgreSQL
		}
		if err != nil || strings.Contains(string(b), cold) || strings.Contains(string(b), v) || strings.Contains(string(b), "locker code is 4471") {
			t.Fatalf("cold mirror still holds a deleted message (%v): %s", err, b)
		}
		checkTotals(t, ts, "d")
	}
	gone(ts)
	ts.Stop()
	ts = startServer(t, dir)
	ts.mustDo(404, "GET", "/v1/messages/"+secret, nil)
	gone(ts)
	ts.Stop()
	mustVerify(t, dir)
}
