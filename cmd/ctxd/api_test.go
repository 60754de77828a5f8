package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"

	"github.com/ctxd/ctxd/memory"
)

func TestStoreRestartSearch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ids := ts.store("proj-1",
		map[string]any{"role": "system", "content": "You are a deployment assistant.", "pinned": true},
		map[string]any{"role": "user", "content": "The staging database password rotates every Friday.", "name": "alice",
			"metadata": map[string]any{"turn": 7, "source": "chat", "urgent": true}},
		msg("assistant", "Noted: rotation happens on Fridays for the staging database."),
	)
	if len(ids) != 3 {
		t.Fatalf("ids = %v", ids)
	}
	before := ts.mustDo(200, "GET", "/v1/sessions/proj-1/messages", nil)
	ts.Stop()

	ts = startServer(t, dir)
	after := ts.mustDo(200, "GET", "/v1/sessions/proj-1/messages", nil)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("messages changed across restart:\n%v\n%v", before, after)
	}
	msgs := after["messages"].([]any)
	m1 := msgs[1].(map[string]any)
	if m1["name"] != "alice" || m1["state"] != "active" || m1["session_id"] != "proj-1" {
		t.Fatalf("stored message = %v", m1)
	}
	md := m1["metadata"].(map[string]any)
	if md["turn"] != float64(7) || md["source"] != "chat" || md["urgent"] != true {
		t.Fatalf("metadata not returned as given: %v", md)
	}
	for _, mode := range []string{"hybrid", "text", "vector"} {
		res := ts.search(map[string]any{"query": "when does the staging password rotate", "session_id": "proj-1", "mode": mode})
		if len(res) == 0 || !contains(idsOf(res)[:min(2, len(res))], ids[1]) {
			t.Errorf("mode %s after restart: %v", mode, idsOf(res))
		}
	}
	st := ts.mustDo(200, "GET", "/v1/sessions/proj-1", nil)
	if st["tokens"].(float64) <= 0 || st["state"] != "ok" {
		t.Fatalf("status = %v", st)
	}
}

func TestTokensAreExact(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	// "hello world" is 2 tokens in both encodings; role "user" is 1. With
	// OpenAI's rule: 3 + 1 + 2 = 6, and a name adds its tokens + 1.
	body := ts.mustDo(201, "POST", "/v1/sessions/tok/messages", map[string]any{"messages": []any{
		msg("user", "hello world"),
		map[string]any{"role": "user", "content": "hello world", "name": "bob"},
	}})
	toks := body["tokens"].([]any)
	if toks[0] != float64(6) || toks[1] != float64(8) {
		t.Fatalf("tokens = %v, want [6 8]", toks)
	}
	st := body["session"].(map[string]any)
	if st["tokens"] != float64(14) {
		t.Fatalf("session tokens = %v, want 14", st["tokens"])
	}
	ts.mustDo(200, "PUT", "/v1/sessions/tok2", map[string]any{"encoding": "cl100k_base", "context_window": 4096})
	body = ts.mustDo(201, "POST", "/v1/sessions/tok2/messages", map[string]any{"messages": []any{msg("user", "tiktoken is great!")}})
	if body["tokens"].([]any)[0] != float64(3+1+6) {
		t.Fatalf("cl100k tokens = %v, want 10", body["tokens"])
	}
	// A session holding messages cannot change encoding: its counts would lie.
	r := ts.do("PUT", "/v1/sessions/tok2", map[string]any{"encoding": "o200k_base"})
	if r.Status != 409 || r.errCode() != "conflict" {
		t.Fatalf("encoding change = %d %s", r.Status, r.Raw)
	}
}

func TestSessionsAPI(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	st := ts.mustDo(200, "PUT", "/v1/sessions/a", map[string]any{"context_window": 10000, "metadata": map[string]any{"team": "x"}})
	if st["context_window"] != float64(10000) || st["encoding"] != "o200k_base" || st["tokens"] != float64(0) {
		t.Fatalf("PUT answer = %v", st)
	}
	ts.mustDo(200, "PUT", "/v1/sessions/b", nil)
	ts.store("c", msg("user", "hi"))
	page := ts.mustDo(200, "GET", "/v1/sessions?limit=2", nil)
	if len(page["sessions"].([]any)) != 2 || page["next_cursor"] == "" {
		t.Fatalf("page 1 = %v", page)
	}
	page2 := ts.mustDo(200, "GET", "/v1/sessions?limit=2&cursor="+page["next_cursor"].(string), nil)
	rest := page2["sessions"].([]any)
	if len(rest) != 1 || rest[0].(map[string]any)["id"] != "c" || page2["next_cursor"] != "" {
		t.Fatalf("page 2 = %v", page2)
	}
	ts.mustDo(404, "GET", "/v1/sessions/nope", nil)
	ts.mustDo(404, "DELETE", "/v1/sessions/nope", nil)
}

// The status shows the session's policy as a nested object; a client that
// PUTs it back with a change gets the change. A field set both ways with two
// values is refused, and the refusal changes nothing.
func TestSessionPolicyRoundTrip(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	st := ts.mustDo(200, "PUT", "/v1/sessions/a", map[string]any{"context_window": 10000})
	pol := st["policy"].(map[string]any)
	if pol["relevance_cutoff"] == 0.2 || pol["keep_recent"] == float64(9) {
		t.Fatalf("defaults already hold the test's values: %v", pol)
	}
	pol["relevance_cutoff"], pol["keep_recent"] = 0.2, 9
	st["context_window"] = 12000
	ts.mustDo(200, "PUT", "/v1/sessions/a", st)
	got := ts.mustDo(200, "GET", "/v1/sessions/a", nil)
	gp := got["policy"].(map[string]any)
	if gp["relevance_cutoff"] != 0.2 || gp["keep_recent"] != float64(9) || got["context_window"] != float64(12000) {
		t.Fatalf("after PUT of the changed status: %v", got)
	}
	// Both forms together, agreeing or on different fields: both apply.
	ts.mustDo(200, "PUT", "/v1/sessions/a", map[string]any{"keep_recent": 7, "policy": map[string]any{"keep_recent": 7, "target_pct": 0.3}})
	gp = ts.mustDo(200, "GET", "/v1/sessions/a", nil)["policy"].(map[string]any)
	if gp["keep_recent"] != float64(7) || gp["target_pct"] != 0.3 {
		t.Fatalf("after PUT of both forms: %v", gp)
	}
	before := ts.mustDo(200, "GET", "/v1/sessions/a", nil)
	r := ts.do("PUT", "/v1/sessions/a", map[string]any{"keep_recent": 5, "policy": map[string]any{"keep_recent": 6}})
	if r.Status != 400 || !strings.Contains(string(r.Raw), "policy.keep_recent") {
		t.Fatalf("conflicting PUT = %d %s", r.Status, r.Raw)
	}
	ts.mustDo(400, "PUT", "/v1/sessions/a", map[string]any{"policy": map[string]any{"relevance_cutoff": "high"}})
	ts.mustDo(400, "PUT", "/v1/sessions/a", map[string]any{"policy": map[string]any{"target_pct": 5}})
	after := ts.mustDo(200, "GET", "/v1/sessions/a", nil)
	delete(before, "updated_at")
	delete(after, "updated_at")
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("refused PUTs changed the session:\n%v\n%v", before, after)
	}
}

func TestMessagesPaging(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	var batch []map[string]any
	for i := 0; i < 25; i++ {
		batch = append(batch, msg("user", fmt.Sprintf("message number %d", i)))
	}
	want := ts.store("p", batch...)
	var got []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		body := ts.mustDo(200, "GET", "/v1/sessions/p/messages?limit=10&state=active&cursor="+cursor, nil)
		for _, m := range body["messages"].([]any) {
			got = append(got, m.(map[string]any)["id"].(string))
		}
		cursor = body["next_cursor"].(string)
		if cursor == "" {
			break
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("paged ids differ from stored ids:\n%v\n%v", got, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("ids are not sortable by time: %s then %s", got[i-1], got[i])
		}
	}
	none := ts.mustDo(200, "GET", "/v1/sessions/p/messages?state=dropped", nil)
	if len(none["messages"].([]any)) != 0 {
		t.Fatalf("dropped filter = %v", none)
	}
}

func TestSearchFilters(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	old := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC)
	recent := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	a := ts.store("alpha",
		map[string]any{"role": "user", "content": "kubernetes cluster upgrade failed", "created_at": old.Format(time.RFC3339)},
		map[string]any{"role": "user", "content": "kubernetes cluster upgrade succeeded", "created_at": recent.Format(time.RFC3339)},
	)
	b := ts.store("beta", map[string]any{"role": "user", "content": "kubernetes cluster upgrade planned", "created_at": recent.Format(time.RFC3339)})
	ts.store("gamma", msg("user", "unrelated chatter about lunch"))

	all := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade"}))
	for _, id := range append(a, b...) {
		if !contains(all, id) {
			t.Fatalf("cross-session search misses %s: %v", id, all)
		}
	}
	only := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade", "session_id": "beta"}))
	if len(only) != 1 || only[0] != b[0] {
		t.Fatalf("session filter: %v", only)
	}
	two := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade", "sessions": []string{"alpha", "gamma"}, "mode": "text"}))
	if len(two) != 2 || contains(two, b[0]) {
		t.Fatalf("sessions filter: %v", two)
	}
	since := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade", "since": "2025-01-01T00:00:00Z"}))
	if contains(since, a[0]) || !contains(since, a[1]) || !contains(since, b[0]) {
		t.Fatalf("since filter: %v", since)
	}
	until := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade", "until": "2025-01-01T00:00:00Z", "mode": "vector"}))
	if len(until) != 1 || until[0] != a[0] {
		t.Fatalf("until filter (vector mode): %v", until)
	}
	active := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade", "states": []string{"active"}, "k": 2}))
	if len(active) != 2 {
		t.Fatalf("k=2 with state filter: %v", active)
	}
	dropped := idsOf(ts.search(map[string]any{"query": "kubernetes upgrade", "states": []string{"dropped"}}))
	if len(dropped) != 0 {
		t.Fatalf("dropped filter finds active messages: %v", dropped)
	}
	res := ts.search(map[string]any{"query": "upgrade failed", "session_id": "alpha", "mode": "text"})
	if h, _ := res[0]["highlight"].(string); !strings.Contains(strings.ToLower(h), "fail") {
		t.Fatalf("highlight = %q", h)
	}
}

func TestDeleteIsolation(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("one", msg("user", "the launch code is pelican"))
	keep := ts.store("two", msg("user", "the launch code is pelican too"))
	ts.mustDo(204, "DELETE", "/v1/sessions/one", nil)
	ts.mustDo(404, "GET", "/v1/sessions/one", nil)
	ts.mustDo(404, "GET", "/v1/sessions/one/messages", nil)
	for _, mode := range []string{"text", "vector", "hybrid"} {
		got := idsOf(ts.search(map[string]any{"query": "launch code pelican", "mode": mode}))
		if len(got) != 1 || got[0] != keep[0] {
			t.Fatalf("%s search after delete = %v, want only %v", mode, got, keep)
		}
	}
	text, vec, err := ts.Main.Index.Count()
	if err != nil || text != 1 || vec != 1 {
		t.Fatalf("index counts after delete = %d text, %d vector (%v), want 1, 1", text, vec, err)
	}
	// A re-created session of the same id starts empty.
	ts.store("one", msg("user", "fresh start"))
	body := ts.mustDo(200, "GET", "/v1/sessions/one/messages", nil)
	if len(body["messages"].([]any)) != 1 {
		t.Fatalf("re-created session holds %v", body)
	}
}

func TestIndexDeletedIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ids1 := ts.store("r", msg("user", "the quarterly report is due on the ninth"), msg("assistant", "I will remind you about the report"))
	ts.Stop()
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir)
	got := idsOf(ts.search(map[string]any{"query": "quarterly report due", "mode": "text"}))
	if len(got) == 0 || got[0] != ids1[0] {
		t.Fatalf("after index removal, search = %v", got)
	}
}

// An index written by a version with another mapping is rebuilt in place
// at start-up: removed, not kept aside as a broken one.
func TestIndexOfAnotherSchemaIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	want := ts.store("r", msg("user", "the lighthouse keeper logs the storms"))
	ts.Stop()
	// The server's index returns from a write before it is on disk; this
	// write must be (the index's config says unsafe_batch: override it).
	idx, err := bleve.OpenUsing(filepath.Join(dir, "index"), map[string]any{"unsafe_batch": false})
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.SetInternal([]byte("ctxd.schema"), []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}
	ts = startServer(t, dir)
	if got := idsOf(ts.search(map[string]any{"query": "lighthouse storms", "mode": "text"})); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after the schema change, search = %v", got)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "index.broken-*")); len(aside) != 0 {
		t.Fatalf("the old index was kept aside as broken: %v", aside)
	}
}

func TestCorruptIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	want := ts.store("r", msg("user", "zebra crossing near the office"))
	ts.Stop()
	// Scribble over every file of the index.
	filepath.Walk(filepath.Join(dir, "index"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			os.WriteFile(p, []byte("garbage"), 0o644)
		}
		return nil
	})
	ts = startServer(t, dir)
	got := idsOf(ts.search(map[string]any{"query": "zebra crossing", "mode": "text"}))
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after index corruption, search = %v", got)
	}
}

// A crash between the store commit and the index write leaves the index
// behind the store; start-up must notice and catch up before answering.
func TestLaggingIndexCatchesUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.store("lag", msg("user", "first message indexed normally"))
	ts.Stop()

	// Write to the store alone, as if the process died before indexing.
	st, err := openStoreOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	lost := &memory.Message{ID: "01LAGGED0000000000000000001", Role: memory.RoleUser, Content: "the hummingbird migration data arrived",
		State: memory.StateActive, Tokens: 9, CreatedAt: ts.now()}
	if _, err := st.Append(t.Context(), memory.DefaultTenant, "lag", nil, []*memory.Message{lost}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	ts = startServer(t, dir)
	got := idsOf(ts.search(map[string]any{"query": "hummingbird migration", "mode": "text"}))
	if len(got) != 1 || got[0] != lost.ID {
		t.Fatalf("lagging index not caught up at start: %v", got)
	}
	ts.mustDo(200, "GET", "/readyz", nil)
}

// With --expansion-weight, hybrid search within a session also finds a
// word's neighbours in the embedded GloVe model by their words ("automobile"
// finds a car), and the snippet marks them; across sessions it does not.
func TestSearchQueryExpansion(t *testing.T) {
	t.Parallel()
	for _, w := range []float64{0, 0.5} {
		ts := startServer(t, t.TempDir(), func(c *Config) { c.ExpansionWeight = w })
		ts.mustDo(200, "PUT", "/v1/sessions/e", map[string]any{})
		ts.store("e", msg("user", "my car broke down on the motorway"), msg("user", "we had soup for lunch"))
		snippets := func(body map[string]any) []string {
			var out []string
			for _, x := range ts.mustDo(200, "POST", "/v1/search", body)["results"].([]any) {
				out = append(out, x.(map[string]any)["highlight"].(string))
			}
			return out
		}
		plain := []string{"my car broke down on the motorway", "we had soup for lunch"}
		want := slices.Clone(plain)
		if w > 0 {
			want[0] = "my «car» broke down on the motorway"
		}
		if got := snippets(map[string]any{"query": "automobile", "session_id": "e"}); !slices.Equal(got, want) {
			t.Errorf("expansion weight %v, in the session: snippets %q, want %q", w, got, want)
		}
		if got := snippets(map[string]any{"query": "automobile"}); !slices.Equal(got, plain) {
			t.Errorf("expansion weight %v, across sessions: snippets %q, want %q", w, got, plain)
		}
	}
}

// Each search result says why it ranks: score_parts has both sides' scores
// and what its neighbouring turns added.
func TestSearchScoreParts(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/p", map[string]any{})
	ts.store("p", msg("user", "who has the pager this week?"), msg("assistant", "Dana, until Friday."), msg("user", "thanks, and the garden?"))
	res := ts.mustDo(200, "POST", "/v1/search", map[string]any{"query": "pager this week", "session_id": "p", "k": 2})["results"].([]any)
	if len(res) != 2 {
		t.Fatalf("%d results", len(res))
	}
	for i, want := range []string{"who has the pager this week?", "Dana, until Friday."} {
		r := res[i].(map[string]any)
		parts, _ := r["score_parts"].(map[string]any)
		if r["content"] != want || parts == nil {
			t.Fatalf("result %d: %v, want %q with score_parts", i, r, want)
		}
		fused := 0.7*parts["text"].(float64) + 0.3*parts["vector"].(float64)
		want := (fused + parts["neighbor"].(float64) + parts["when"].(float64)) * parts["author"].(float64)
		if got := r["score"].(float64); math.Abs(got-want) > 1e-9 {
			t.Errorf("result %d: score %v is not (0.7 text + 0.3 vector + neighbor + when) * author (%v)", i, got, parts)
		}
	}
	if n := res[1].(map[string]any)["score_parts"].(map[string]any)["neighbor"].(float64); n <= 0 {
		t.Errorf("the answer after the matched question got nothing from it: %v", n)
	}
}
