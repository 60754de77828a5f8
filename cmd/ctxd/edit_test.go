package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

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

// exactTokens is what one message costs, counted again.
func exactTokens(t *testing.T, m *api.Message) int {
	t.Helper()
	return servertest.Recount(t, []api.WindowMessage{{Message: *m}}, "") - memory.ReplyPriming
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

func (ts *testServer) events(stream, session string) []api.Event {
	ts.t.Helper()
	var out api.EventList
	ts.call(200, "GET", "/v1/events/"+stream+"?session_id="+session, nil, &out)
	return out.Events
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
	before := ts.message(u)
	newText := "The staging database password rotates every Monday at noon, after the backup window."
	got := ts.patch(u, map[string]any{"content": newText})
	if got.Content != newText || got.ID != u || got.State != memory.StateActive || !got.CreatedAt.Equal(before.CreatedAt) {
		t.Fatalf("edited message = %+v", got)
	}
	if exact := exactTokens(t, got); got.Tokens != exact || exact == before.Tokens {
		t.Fatalf("edited message has %v tokens, exact count %d (before %v)", got.Tokens, exact, before.Tokens)
	}
	if len(got.Versions) != 1 {
		t.Fatalf("edited message lists versions %v, want one", got.Versions)
	}
	v := got.Versions[0]
	old := ts.message(v)
	if old.Content != before.Content || old.State != memory.StateDropped || old.Kind != memory.KindVersion || old.VersionOf != u ||
		old.Tokens != before.Tokens || old.Role != memory.RoleUser || old.Pinned || old.Metadata["src"] != "chat" {
		t.Fatalf("earlier version = %+v", old)
	}
	checkTotals(t, ts, "e")

	// The cold listing and its mirror show the earlier version, recoverable
	// for the session's recoverable_for_days.
	var cold api.ColdList
	ts.call(200, "GET", "/v1/sessions/e/cold", nil, &cold)
	var chunk *api.ColdChunk
	for i, c := range cold.Chunks {
		if c.ID == v {
			chunk = &cold.Chunks[i]
		}
	}
	if chunk == nil || chunk.DropReason != memory.ReasonEdited {
		t.Fatalf("cold chunk of the earlier version = %+v", chunk)
	}
	if d := chunk.RecoverableUntil.Sub(ts.now()); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Fatalf("recoverable_until %v is not 30 days away", chunk.RecoverableUntil)
	}
	if b, err := readColdFile(coldFile(dir, "e")); servertest.HasMirror(dir) && (err != nil || !strings.Contains(string(b), v) || !strings.Contains(string(b), `"version_of":"`+u)) {
		t.Fatalf("cold mirror lacks the earlier version: %v %s", err, b)
	}

	// Logged with what changed and the tokens before and after.
	evs := ts.events("edits", "e")
	if len(evs) != 1 || evs[0]["op"] != "edit" || evs[0]["message"] != u || fmt.Sprint(evs[0]["changed"]) != "[content]" ||
		evs[0]["tokens_before"] != float64(before.Tokens) || evs[0]["tokens_after"] != float64(got.Tokens) || evs[0]["previous_version"] != v {
		t.Fatalf("edit events = %v", evs)
	}

	checkIndex := func(ts *testServer) {
		t.Helper()
		if hits := idsOf(textSearch(ts, "e", "Monday backup")); len(hits) == 0 || hits[0] != u {
			t.Fatalf("the new words find %v, want %s first", hits, u)
		}
		hits := textSearch(ts, "e", "Friday")
		if len(hits) != 1 || hits[0].ID != v || hits[0].State != memory.StateDropped {
			t.Fatalf("the old words find %v, want only the earlier version %s", hits, v)
		}
		// The window has the message as it is now, never the version.
		w := ts.window("e", map[string]any{"prompt": "when does the password rotate, Friday?"})
		var contents []string
		for _, m := range w.Messages {
			contents = append(contents, m.Content)
		}
		if joined := strings.Join(contents, "|"); !strings.Contains(joined, "Monday") || strings.Contains(joined, "Friday") {
			t.Fatalf("window = %v", contents)
		}
	}
	checkIndex(ts)

	// A second edit keeps both earlier versions, oldest first; pinned and
	// metadata change without a new version.
	third := ts.patch(u, map[string]any{"content": "It rotates on the first of the month.",
		"important": true, "metadata": map[string]any{"src": "chat", "n": 2}})
	if vs := third.Versions; len(vs) != 2 || vs[0] != v || !third.Important || third.Metadata["n"] != 2.0 {
		t.Fatalf("after a second edit = %+v", third)
	}
	flags := ts.patch(ids[0], map[string]any{"pinned": false})
	if flags.Pinned || flags.Versions != nil || flags.Content != "You are a deployment assistant." {
		t.Fatalf("unpinned = %+v", flags)
	}
	// Changing nothing is answered, and not logged.
	ts.mustDo(200, "PATCH", "/v1/messages/"+ids[0], map[string]any{"pinned": false})
	if evs := ts.events("edits", "e"); len(evs) != 3 {
		t.Fatalf("%d edit events, want 3", len(evs))
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
	if hits := idsOf(textSearch(ts, "e", "Friday")); len(hits) != 1 || hits[0] != v {
		t.Fatalf("after restart the old words find %v", hits)
	}
	checkTotals(t, ts, "e")
	// Asked for, an earlier version comes back at its message's place in
	// the conversation (the window builder does not order the two among
	// themselves), not after the turns that followed.
	ts.mustDo(200, "POST", "/v1/sessions/e/messages/"+v+"/recover", nil)
	w := ts.window("e", map[string]any{"prompt": "what rotates?"})
	var order []string
	for _, m := range w.Messages {
		order = append(order, m.ID)
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
