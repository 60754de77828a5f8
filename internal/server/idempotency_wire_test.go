package server_test

import (
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server"
)

// withKey returns a client of the same server that sends an Idempotency-Key.
func (ts *testServer) withKey(key string) *testServer {
	c := *ts
	c.Header = ts.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	c.Header.Set(api.IdempotencyKeyHeader, key)
	return &c
}

// written is the answer to a write, decoded when it is a 201.
type written struct {
	resp
	out api.AppendOut
}

func postMessages(ts *testServer, session string, msgs ...any) written {
	ts.t.Helper()
	r := ts.do("POST", "/v1/sessions/"+session+"/messages", map[string]any{"messages": msgs})
	w := written{resp: r}
	if r.Status == 201 {
		ts.decode(r, &w.out)
	}
	return w
}

// A retried POST with the same Idempotency-Key stores nothing twice and is
// answered with the first answer's ids and tokens, after a restart too; the
// same key with other messages is a 409; keys are per session and tenant.
func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	batch := []any{msg("user", "deploy the api to staging"),
		api.MessageIn{Role: "assistant", Content: "Deploying.", Metadata: map[string]any{"n": 1}}}
	first := postMessages(ts.withKey("k-1"), "i", batch...)
	if first.Status != 201 {
		t.Fatalf("first write = %d %s", first.Status, first.Raw)
	}
	snap := ts.snapshot("i")
	retry := postMessages(ts.withKey("k-1"), "i", batch...)
	if retry.Status != 201 || !slices.Equal(retry.out.IDs, first.out.IDs) || !slices.Equal(retry.out.Tokens, first.out.Tokens) {
		t.Fatalf("retry = %d %s, first %s", retry.Status, retry.Raw, first.Raw)
	}
	if retry.out.Session == nil || retry.out.Session.ID != "i" || retry.out.Compaction != nil {
		t.Fatalf("retry answer = %s", retry.Raw)
	}
	if got := ts.snapshot("i"); got != snap {
		t.Fatalf("a retry changed the session:\nbefore %s\nafter  %s", snap, got)
	}
	// Same key, other messages: refused, nothing stored.
	other := postMessages(ts.withKey("k-1"), "i", msg("user", "deploy the api to production"))
	if other.Status != 409 || other.errCode() != "conflict" || !strings.Contains(string(other.Raw), "k-1") {
		t.Fatalf("same key, other body = %d %s", other.Status, other.Raw)
	}
	if got := ts.snapshot("i"); got != snap {
		t.Fatal("a refused write changed the session")
	}
	// Keys are per session: the same key stores in another session.
	if r := postMessages(ts.withKey("k-1"), "j", batch...); r.Status != 201 || slices.Equal(r.out.IDs, first.out.IDs) {
		t.Fatalf("same key in another session = %d %s", r.Status, r.Raw)
	}
	snap = ts.snapshot("i") // the listing of sessions has j now
	for _, bad := range []string{strings.Repeat("k", 256), "tab\tkey", "ключ"} {
		if r := postMessages(ts.withKey(bad), "i", batch...); r.Status != 400 || !strings.Contains(string(r.Raw), "Idempotency-Key") {
			t.Fatalf("key %q = %d %s", bad, r.Status, r.Raw)
		}
	}
	two := ts.withKey("a")
	two.Header.Add(api.IdempotencyKeyHeader, "b")
	if r := postMessages(two, "i", batch...); r.Status != 400 {
		t.Fatalf("two keys = %d %s", r.Status, r.Raw)
	}
	if got := ts.snapshot("i"); got != snap {
		t.Fatal("refused keys changed the session")
	}

	ts.Stop()
	ts = startServer(t, dir)
	again := postMessages(ts.withKey("k-1"), "i", batch...)
	if again.Status != 201 || !slices.Equal(again.out.IDs, first.out.IDs) {
		t.Fatalf("retry after a restart = %d %s", again.Status, again.Raw)
	}
	if n := len(ts.allMessages("i")); n != 2 {
		t.Fatalf("session holds %d messages, want 2", n)
	}
	// A deleted and re-created session forgets its keys.
	ts.call(204, "DELETE", "/v1/sessions/i", nil, nil)
	if r := postMessages(ts.withKey("k-1"), "i", batch...); r.Status != 201 || slices.Equal(r.out.IDs, first.out.IDs) {
		t.Fatalf("key of a deleted session = %d %s", r.Status, r.Raw)
	}
}

// Concurrent copies of one write (a client retrying before the first
// answer came) store it once, and all get its answer.
func TestIdempotencyKeyConcurrentRetries(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	const n = 8
	answers := make([]written, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = postMessages(ts.withKey("same"), "c", msg("user", "run the migration"), msg("assistant", "Running it."))
		}()
	}
	wg.Wait()
	for _, a := range answers {
		if a.Status != 201 || !slices.Equal(a.out.IDs, answers[0].out.IDs) {
			t.Fatalf("answers differ: %d %s vs %s", a.Status, a.Raw, answers[0].Raw)
		}
	}
	if got := len(ts.allMessages("c")); got != 2 {
		t.Fatalf("%d copies of one write stored %d messages, want 2", n, got)
	}
	checkTotals(t, ts, "c")
}

// withID is a message carrying the client's message_id.
func withID(role, content, id string) api.MessageIn {
	return api.MessageIn{Role: role, Content: content, MessageID: id}
}

// A message whose client message_id the session holds is skipped and its
// stored id answered in its place; the rest of the write is stored. Ids
// are per session and tenant, survive a restart, and leave with their
// message.
func TestClientMessageIDs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startWithKeys(t, func(c *server.Config) { c.DataDir = dir })
	a := ts.as(keyA)
	one := a.store("m", withID("user", "first", "turn-1"), withID("assistant", "second", "turn-2"))
	r := postMessages(a, "m", withID("assistant", "second", "turn-2"), withID("user", "third", "turn-3"), msg("user", "no id"))
	ids := r.out.IDs
	if r.Status != 201 || ids[0] != one[1] || ids[1] == one[1] || len(ids) != 3 {
		t.Fatalf("write with a known message_id = %d %s", r.Status, r.Raw)
	}
	if tok := r.out.Tokens; tok[0] != a.message(one[1]).Tokens {
		t.Fatalf("tokens of the skipped message = %v", tok[0])
	}
	msgs := a.allMessages("m")
	if len(msgs) != 4 || msgs[1].MessageID != "turn-2" || msgs[3].MessageID != "" {
		t.Fatalf("messages = %+v", msgs)
	}
	if hits := a.search(api.SearchIn{Query: "second", SessionID: "m", Mode: "text", K: 20}); len(hits) != 1 {
		t.Fatalf("search finds %d copies of a retried message", len(hits))
	}
	// Another session, or another tenant, has its own ids.
	if got := a.store("m2", withID("user", "first", "turn-1")); got[0] == one[0] {
		t.Fatal("a message_id of another session was taken as known")
	}
	if got := ts.as(keyB).store("m", withID("user", "first", "turn-1")); got[0] == one[0] {
		t.Fatal("a message_id of another tenant was taken as known")
	}
	// One id twice in a write is a client bug: 400, nothing stored.
	snap := a.snapshot("m")
	dup := postMessages(a, "m", withID("user", "x", "turn-9"), withID("user", "y", "turn-9"))
	if dup.Status != 400 || !strings.Contains(string(dup.Raw), "messages[1].message_id") {
		t.Fatalf("repeated message_id = %d %s", dup.Status, dup.Raw)
	}
	for _, bad := range []any{7, strings.Repeat("m", 257), "nul\u0000"} {
		if r := postMessages(a, "m", map[string]any{"role": "user", "content": "x", "message_id": bad}); r.Status != 400 {
			t.Fatalf("message_id %q = %d %s", bad, r.Status, r.Raw)
		}
	}
	if a.snapshot("m") != snap {
		t.Fatal("refused writes changed the session")
	}

	ts.Stop()
	ts = startWithKeys(t, func(c *server.Config) { c.DataDir = dir })
	a = ts.as(keyA)
	again := postMessages(a, "m", withID("user", "first", "turn-1"))
	if again.Status != 201 || again.out.IDs[0] != one[0] {
		t.Fatalf("after a restart = %d %s", again.Status, again.Raw)
	}
	// Deleted, the id is free again: the message is stored anew.
	a.call(204, "DELETE", "/v1/messages/"+one[0], nil, nil)
	if got := a.store("m", withID("user", "first", "turn-1")); got[0] == one[0] {
		t.Fatal("the id of a deleted message still answers")
	}
	// Both at once: a retry under the key answers the first answer.
	k := a.withKey("both")
	w1 := postMessages(k, "m", withID("user", "fourth", "turn-4"), msg("assistant", "fifth"))
	w2 := postMessages(k, "m", withID("user", "fourth", "turn-4"), msg("assistant", "fifth"))
	if w1.Status != 201 || !slices.Equal(w1.out.IDs, w2.out.IDs) {
		t.Fatalf("keyed write with message ids = %s then %s", w1.Raw, w2.Raw)
	}
	checkTotals(t, a, "m")
}
