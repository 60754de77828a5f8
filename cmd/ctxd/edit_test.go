package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// checkTotals asserts the session's status agrees with its messages (counts,
// summaries, no id twice), that each message's tokens are its exact cost,
// and that the status's tokens are the sum over the working window (the
// sessions here hold no tool output long enough to be pruned). It returns
// the messages and what the pinned and system ones in the window cost.
func checkTotals(t *testing.T, ts *testServer, session string) ([]map[string]any, int) {
	t.Helper()
	msgs := checkCounters(t, ts, session)
	window, pinned := 0, 0
	for _, m := range msgs {
		tokens := int(m["tokens"].(float64))
		if exact := recount(t, []any{m}, "") - memory.ReplyPriming; tokens != exact {
			t.Fatalf("message %s says %d tokens, its content counts %d", m["id"], tokens, exact)
		}
		if s := m["state"]; s != "active" && s != "recovered" {
			continue
		}
		window += tokens
		if m["pinned"] == true || (m["role"] == "system" && m["kind"] != "summary") {
			pinned += tokens
		}
	}
	st := ts.mustDo(200, "GET", "/v1/sessions/"+session, nil)
	if got := int(st["tokens"].(float64)); got != window {
		t.Fatalf("session %s says %d tokens, its window's messages add up to %d", session, got, window)
	}
	return msgs, pinned
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

func (ts *testServer) events(stream, session string) []map[string]any {
	ts.t.Helper()
	var out []map[string]any
	for _, e := range ts.mustDo(200, "GET", "/v1/events/"+stream+"?session_id="+session, nil)["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

func textSearch(ts *testServer, session, query string) []map[string]any {
	return ts.search(map[string]any{"query": query, "session_id": session, "mode": "text", "k": 20})
}

// An edit of content is counted and embedded again, the index follows it
// (the new words find the message, the old ones only its earlier version,
// kept cold), the totals stay exact, and all of it survives a restart.
// With TestDeleteMessage it stays here: both check what a restart and the
// offline `ctxd verify` find (the other edit rules: internal/server).
func TestEditMessageContent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir, thirtyDays)
	ids := ts.store("e",
		map[string]any{"role": "system", "content": "You are a deployment assistant.", "pinned": true},
		map[string]any{"role": "user", "content": "The staging database password rotates every Friday.", "metadata": map[string]any{"src": "chat"}},
		msg("assistant", "Noted: the password rotates weekly."))
	u := ids[1]
	before := ts.mustDo(200, "GET", "/v1/messages/"+u, nil)
	newText := "The staging database password rotates every Monday at noon, after the backup window."
	got := ts.mustDo(200, "PATCH", "/v1/messages/"+u, map[string]any{"content": newText})
	if got["content"] != newText || got["id"] != u || got["state"] != "active" || got["created_at"] != before["created_at"] {
		t.Fatalf("edited message = %v", got)
	}
	if exact := recount(t, []any{got}, "") - memory.ReplyPriming; int(got["tokens"].(float64)) != exact || exact == int(before["tokens"].(float64)) {
		t.Fatalf("edited message has %v tokens, exact count %d (before %v)", got["tokens"], exact, before["tokens"])
	}
	versions, _ := got["versions"].([]any)
	if len(versions) != 1 {
		t.Fatalf("edited message lists versions %v, want one", got["versions"])
	}
	v := versions[0].(string)
	old := ts.mustDo(200, "GET", "/v1/messages/"+v, nil)
	if old["content"] != before["content"] || old["state"] != "dropped" || old["kind"] != "version" || old["version_of"] != u ||
		old["tokens"] != before["tokens"] || old["role"] != "user" || old["pinned"] != false || old["metadata"].(map[string]any)["src"] != "chat" {
		t.Fatalf("earlier version = %v", old)
	}
	checkTotals(t, ts, "e")

	// The cold listing and its mirror show the earlier version, recoverable
	// for the session's recoverable_for_days.
	var chunk map[string]any
	for _, c := range ts.mustDo(200, "GET", "/v1/sessions/e/cold", nil)["chunks"].([]any) {
		if c.(map[string]any)["id"] == v {
			chunk = c.(map[string]any)
		}
	}
	if chunk == nil || chunk["drop_reason"] != "edited" {
		t.Fatalf("cold chunk of the earlier version = %v", chunk)
	}
	until, _ := time.Parse(time.RFC3339Nano, chunk["recoverable_until"].(string))
	if d := until.Sub(ts.now()); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Fatalf("recoverable_until %v is not 30 days away", until)
	}
	if b, err := readColdFile(coldFile(dir, "e")); servertest.HasMirror(dir) && (err != nil || !strings.Contains(string(b), v) || !strings.Contains(string(b), `"version_of":"`+u)) {
		t.Fatalf("cold mirror lacks the earlier version: %v %s", err, b)
	}

	// Logged with what changed and the tokens before and after.
	evs := ts.events("edits", "e")
	if len(evs) != 1 || evs[0]["op"] != "edit" || evs[0]["message"] != u || fmt.Sprint(evs[0]["changed"]) != "[content]" ||
		evs[0]["tokens_before"] != before["tokens"] || evs[0]["tokens_after"] != got["tokens"] || evs[0]["previous_version"] != v {
		t.Fatalf("edit events = %v", evs)
	}

	checkIndex := func(ts *testServer) {
		t.Helper()
		if hits := idsOf(textSearch(ts, "e", "Monday backup")); len(hits) == 0 || hits[0] != u {
			t.Fatalf("the new words find %v, want %s first", hits, u)
		}
		hits := textSearch(ts, "e", "Friday")
		if len(hits) != 1 || hits[0]["id"] != v || hits[0]["state"] != "dropped" {
			t.Fatalf("the old words find %v, want only the earlier version %s", hits, v)
		}
		// The window has the message as it is now, never the version.
		w := ts.mustDo(200, "POST", "/v1/sessions/e/context", map[string]any{"prompt": "when does the password rotate, Friday?"})
		var contents []string
		for _, m := range w["messages"].([]any) {
			contents = append(contents, m.(map[string]any)["content"].(string))
		}
		if joined := strings.Join(contents, "|"); !strings.Contains(joined, "Monday") || strings.Contains(joined, "Friday") {
			t.Fatalf("window = %v", contents)
		}
	}
	checkIndex(ts)

	// A second edit keeps both earlier versions, oldest first; pinned and
	// metadata change without a new version.
	third := ts.mustDo(200, "PATCH", "/v1/messages/"+u, map[string]any{"content": "It rotates on the first of the month.",
		"important": true, "metadata": map[string]any{"src": "chat", "n": 2}})
	if vs := third["versions"].([]any); len(vs) != 2 || vs[0] != v || third["important"] != true || third["metadata"].(map[string]any)["n"] != 2.0 {
		t.Fatalf("after a second edit = %v", third)
	}
	flags := ts.mustDo(200, "PATCH", "/v1/messages/"+ids[0], map[string]any{"pinned": false})
	if flags["pinned"] != false || flags["versions"] != nil || flags["content"] != "You are a deployment assistant." {
		t.Fatalf("unpinned = %v", flags)
	}
	// Changing nothing is answered, and not logged.
	ts.mustDo(200, "PATCH", "/v1/messages/"+ids[0], map[string]any{"pinned": false})
	if evs := ts.events("edits", "e"); len(evs) != 3 {
		t.Fatalf("%d edit events, want 3", len(evs))
	}
	checkTotals(t, ts, "e")

	ts.Stop()
	ts = startServer(t, dir)
	after := ts.mustDo(200, "GET", "/v1/messages/"+u, nil)
	if after["content"] != "It rotates on the first of the month." || len(after["versions"].([]any)) != 2 {
		t.Fatalf("after restart = %v", after)
	}
	if hits := idsOf(textSearch(ts, "e", "first month")); len(hits) == 0 || hits[0] != u {
		t.Fatalf("after restart the new words find %v", hits)
	}
	if hits := idsOf(textSearch(ts, "e", "Friday")); len(hits) != 1 || hits[0] != v {
		t.Fatalf("after restart the old words find %v", hits)
	}
	checkTotals(t, ts, "e")
	// Asked for, an earlier version comes back at its message's place in
	// the conversation (the window builder does not order the two among
	// themselves), not after the turns that followed.
	ts.mustDo(200, "POST", "/v1/sessions/e/messages/"+v+"/recover", nil)
	w := ts.mustDo(200, "POST", "/v1/sessions/e/context", map[string]any{"prompt": "what rotates?"})
	var order []string
	for _, m := range w["messages"].([]any) {
		order = append(order, m.(map[string]any)["id"].(string))
	}
	if len(order) != 4 || order[0] != ids[0] || order[3] != ids[2] || !(order[1] == u && order[2] == v || order[1] == v && order[2] == u) {
		t.Fatalf("window order %v, want %s, then %s and %s, then %s", order, ids[0], u, v, ids[2])
	}
	checkTotals(t, ts, "e")
	ts.Stop()
	mustVerify(t, dir)
}

// A deleted message leaves the store, both indexes and the cold mirror,
// with its earlier versions; the totals stay exact; a restart keeps it gone.
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
	v := ts.mustDo(200, "PATCH", "/v1/messages/"+secret, map[string]any{"content": "My locker code is 9902, by the okapi enclosure."})["versions"].([]any)[0].(string)
	// Enough chatter to compact: some early turns go cold and into the mirror.
	chat(ts, "d", 50)
	var cold string
	for _, m := range allMessages(ts, "d") {
		if m["state"] == "dropped" && m["kind"] != "version" && cold == "" {
			cold = m["id"].(string)
		}
	}
	if cold == "" {
		t.Fatal("setup: nothing dropped")
	}
	coldText := ts.mustDo(200, "GET", "/v1/messages/"+cold, nil)["content"].(string)

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
				if h["id"] == secret || h["id"] == v {
					t.Fatalf("search %q still finds deleted %s", q, h["id"])
				}
			}
		}
		for _, h := range ts.search(map[string]any{"query": coldText, "session_id": "d", "k": 50}) {
			if h["id"] == cold {
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
	evs := ts.events("edits", "d")
	deleted := map[string]bool{}
	for _, e := range evs {
		if e["op"] == "delete" {
			deleted[e["message"].(string)] = true
			if e["tokens_after"] != 0.0 || e["tokens_before"] == 0.0 {
				t.Fatalf("delete event = %v", e)
			}
		}
	}
	if len(deleted) != 3 || !deleted[secret] || !deleted[v] || !deleted[cold] {
		t.Fatalf("delete events name %v", deleted)
	}
	ts.Stop()
	ts = startServer(t, dir)
	ts.mustDo(404, "GET", "/v1/messages/"+secret, nil)
	gone(ts)
	ts.Stop()
	mustVerify(t, dir)
}
