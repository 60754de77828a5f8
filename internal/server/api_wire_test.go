package server_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blevesearch/bleve/v2"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
)

func idsOf(results []api.SearchResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.ID)
	}
	return out
}

func TestStoreRestartSearch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir)
	ids := first.store("proj-1",
		api.MessageIn{Role: "system", Content: "You are a deployment assistant.", Pinned: true},
		api.MessageIn{Role: "user", Content: "The staging database password rotates every Friday.", Name: "alice",
			Metadata: map[string]any{"turn": 7, "source": "chat", "urgent": true}},
		msg("assistant", "Noted: rotation happens on Fridays for the staging database."),
	)
	if len(ids) != 3 {
		t.Fatalf("ids = %v", ids)
	}
	before := first.do("GET", "/v1/sessions/proj-1/messages", nil)
	first.Stop()

	ts := startServer(t, dir)
	after := ts.do("GET", "/v1/sessions/proj-1/messages", nil)
	if before.Status != 200 || string(before.Raw) != string(after.Raw) {
		t.Fatalf("messages changed across restart:\n%s\n%s", before.Raw, after.Raw)
	}
	var page api.MessageList
	ts.call(200, "GET", "/v1/sessions/proj-1/messages", nil, &page)
	m1 := page.Messages[1]
	if m1.Name != "alice" || m1.State != memory.StateActive || m1.SessionID != "proj-1" {
		t.Fatalf("stored message = %+v", m1)
	}
	if md := m1.Metadata; md["turn"] != float64(7) || md["source"] != "chat" || md["urgent"] != true {
		t.Fatalf("metadata not returned as given: %v", md)
	}
	for _, mode := range []string{"hybrid", "text", "vector"} {
		res := ts.search(api.SearchIn{Query: "when does the staging password rotate", SessionID: "proj-1", Mode: mode})
		if len(res) == 0 || !slices.Contains(idsOf(res)[:min(2, len(res))], ids[1]) {
			t.Errorf("mode %s after restart: %v", mode, idsOf(res))
		}
	}
	if st := ts.session("proj-1"); st.Tokens <= 0 || st.State != "ok" {
		t.Fatalf("status = %+v", st)
	}
}

func TestTokensAreExact(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	// "hello world" is 2 tokens in both encodings; role "user" is 1. With
	// OpenAI's rule: 3 + 1 + 2 = 6, and a name adds its tokens + 1.
	out := ts.append("tok", msg("user", "hello world"), api.MessageIn{Role: "user", Content: "hello world", Name: "bob"})
	if !slices.Equal(out.Tokens, []int{6, 8}) {
		t.Fatalf("tokens = %v, want [6 8]", out.Tokens)
	}
	if out.Session.Tokens != 14 {
		t.Fatalf("session tokens = %v, want 14", out.Session.Tokens)
	}
	ts.putSession("tok2", map[string]any{"encoding": "cl100k_base", "context_window": 4096})
	if out := ts.append("tok2", msg("user", "tiktoken is great!")); out.Tokens[0] != 3+1+6 {
		t.Fatalf("cl100k tokens = %v, want 10", out.Tokens)
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
	st := ts.putSession("a", map[string]any{"context_window": 10000, "metadata": map[string]any{"team": "x"}})
	if st.ContextWindow != 10000 || st.Encoding != "o200k_base" || st.Tokens != 0 {
		t.Fatalf("PUT answer = %+v", st)
	}
	ts.call(200, "PUT", "/v1/sessions/b", nil, nil)
	ts.store("c", msg("user", "hi"))
	var page api.SessionList
	ts.call(200, "GET", "/v1/sessions?limit=2", nil, &page)
	if len(page.Sessions) != 2 || page.NextCursor == "" {
		t.Fatalf("page 1 = %+v", page)
	}
	var page2 api.SessionList
	ts.call(200, "GET", "/v1/sessions?limit=2&cursor="+page.NextCursor, nil, &page2)
	if len(page2.Sessions) != 1 || page2.Sessions[0].ID != "c" || page2.NextCursor != "" {
		t.Fatalf("page 2 = %+v", page2)
	}
	ts.call(404, "GET", "/v1/sessions/nope", nil, nil)
	ts.call(404, "DELETE", "/v1/sessions/nope", nil, nil)
}

// The status shows the session's policy as a nested object; a client that
// PUTs it back with a change gets the change. A field set both ways with two
// values is refused, and the refusal changes nothing.
func TestSessionPolicyRoundTrip(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	st := ts.putSession("a", map[string]any{"context_window": 10000})
	if st.Policy.RelevanceCutoff == 0.2 || st.Policy.KeepRecent == 9 {
		t.Fatalf("defaults already hold the test's values: %+v", st.Policy)
	}
	st.Policy.RelevanceCutoff, st.Policy.KeepRecent = 0.2, 9
	st.ContextWindow = 12000
	ts.call(200, "PUT", "/v1/sessions/a", st, nil)
	got := ts.session("a")
	if got.Policy.RelevanceCutoff != 0.2 || got.Policy.KeepRecent != 9 || got.ContextWindow != 12000 {
		t.Fatalf("after PUT of the changed status: %+v", got)
	}
	// Both forms together, agreeing or on different fields: both apply.
	ts.putSession("a", map[string]any{"keep_recent": 7, "policy": map[string]any{"keep_recent": 7, "target_pct": 0.3}})
	if gp := ts.session("a").Policy; gp.KeepRecent != 7 || gp.TargetPct != 0.3 {
		t.Fatalf("after PUT of both forms: %+v", gp)
	}
	before := ts.session("a")
	r := ts.do("PUT", "/v1/sessions/a", map[string]any{"keep_recent": 5, "policy": map[string]any{"keep_recent": 6}})
	if r.Status != 400 || !strings.Contains(string(r.Raw), "policy.keep_recent") {
		t.Fatalf("conflicting PUT = %d %s", r.Status, r.Raw)
	}
	ts.call(400, "PUT", "/v1/sessions/a", map[string]any{"policy": map[string]any{"relevance_cutoff": "high"}}, nil)
	ts.call(400, "PUT", "/v1/sessions/a", map[string]any{"policy": map[string]any{"target_pct": 5}}, nil)
	after := ts.session("a")
	before.UpdatedAt, after.UpdatedAt = time.Time{}, time.Time{}
	if b, a := jsonOf(t, before), jsonOf(t, after); b != a {
		t.Fatalf("refused PUTs changed the session:\n%s\n%s", b, a)
	}
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMessagesPaging(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	var batch []api.MessageIn
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
		var page api.MessageList
		ts.call(200, "GET", "/v1/sessions/p/messages?limit=10&state=active&cursor="+cursor, nil, &page)
		for _, m := range page.Messages {
			got = append(got, m.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("paged ids differ from stored ids:\n%v\n%v", got, want)
	}
	for i := 1; i < len(got); i++ {
		if got[i] <= got[i-1] {
			t.Fatalf("ids are not sortable by time: %s then %s", got[i-1], got[i])
		}
	}
	var none api.MessageList
	ts.call(200, "GET", "/v1/sessions/p/messages?state=dropped", nil, &none)
	if len(none.Messages) != 0 {
		t.Fatalf("dropped filter = %+v", none)
	}
}

func TestSearchFilters(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	old := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	recent := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	a := ts.store("alpha",
		api.MessageIn{Role: "user", Content: "kubernetes cluster upgrade failed", CreatedAt: old},
		api.MessageIn{Role: "user", Content: "kubernetes cluster upgrade succeeded", CreatedAt: recent},
	)
	b := ts.store("beta", api.MessageIn{Role: "user", Content: "kubernetes cluster upgrade planned", CreatedAt: recent})
	ts.store("gamma", msg("user", "unrelated chatter about lunch"))

	all := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade"}))
	for _, id := range append(a, b...) {
		if !slices.Contains(all, id) {
			t.Fatalf("cross-session search misses %s: %v", id, all)
		}
	}
	only := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade", SessionID: "beta"}))
	if len(only) != 1 || only[0] != b[0] {
		t.Fatalf("session filter: %v", only)
	}
	two := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade", Sessions: []string{"alpha", "gamma"}, Mode: "text"}))
	if len(two) != 2 || slices.Contains(two, b[0]) {
		t.Fatalf("sessions filter: %v", two)
	}
	since := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade", Since: "2025-01-01T00:00:00Z"}))
	if slices.Contains(since, a[0]) || !slices.Contains(since, a[1]) || !slices.Contains(since, b[0]) {
		t.Fatalf("since filter: %v", since)
	}
	until := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade", Until: "2025-01-01T00:00:00Z", Mode: "vector"}))
	if len(until) != 1 || until[0] != a[0] {
		t.Fatalf("until filter (vector mode): %v", until)
	}
	active := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade", States: []string{"active"}, K: 2}))
	if len(active) != 2 {
		t.Fatalf("k=2 with state filter: %v", active)
	}
	dropped := idsOf(ts.search(api.SearchIn{Query: "kubernetes upgrade", States: []string{"dropped"}}))
	if len(dropped) != 0 {
		t.Fatalf("dropped filter finds active messages: %v", dropped)
	}
	res := ts.search(api.SearchIn{Query: "upgrade failed", SessionID: "alpha", Mode: "text"})
	if h := res[0].Highlight; !strings.Contains(strings.ToLower(h), "fail") {
		t.Fatalf("highlight = %q", h)
	}
}

func TestDeleteIsolation(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("one", msg("user", "the launch code is pelican"))
	keep := ts.store("two", msg("user", "the launch code is pelican too"))
	ts.call(204, "DELETE", "/v1/sessions/one", nil, nil)
	ts.call(404, "GET", "/v1/sessions/one", nil, nil)
	ts.call(404, "GET", "/v1/sessions/one/messages", nil, nil)
	for _, mode := range []string{"text", "vector", "hybrid"} {
		got := idsOf(ts.search(api.SearchIn{Query: "launch code pelican", Mode: mode}))
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
	var page api.MessageList
	ts.call(200, "GET", "/v1/sessions/one/messages", nil, &page)
	if len(page.Messages) != 1 {
		t.Fatalf("re-created session holds %+v", page)
	}
}

func TestIndexDeletedIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir)
	ids1 := first.store("r", msg("user", "the quarterly report is due on the ninth"), msg("assistant", "I will remind you about the report"))
	first.Stop()
	if err := os.RemoveAll(filepath.Join(dir, "index")); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, dir)
	got := idsOf(ts.search(api.SearchIn{Query: "quarterly report due", Mode: "text"}))
	if len(got) == 0 || got[0] != ids1[0] {
		t.Fatalf("after index removal, search = %v", got)
	}
}

// An index written by a version with another mapping is rebuilt in place
// at start-up: removed, not kept aside as a broken one.
func TestIndexOfAnotherSchemaIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir)
	want := first.store("r", msg("user", "the lighthouse keeper logs the storms"))
	first.Stop()
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
	ts := startServer(t, dir)
	if got := idsOf(ts.search(api.SearchIn{Query: "lighthouse storms", Mode: "text"})); len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after the schema change, search = %v", got)
	}
	if aside, _ := filepath.Glob(filepath.Join(dir, "index.broken-*")); len(aside) != 0 {
		t.Fatalf("the old index was kept aside as broken: %v", aside)
	}
}

func TestCorruptIndexIsRebuilt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir)
	want := first.store("r", msg("user", "zebra crossing near the office"))
	first.Stop()
	// Scribble over every file of the index.
	filepath.Walk(filepath.Join(dir, "index"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			os.WriteFile(p, []byte("garbage"), 0o644)
		}
		return nil
	})
	ts := startServer(t, dir)
	got := idsOf(ts.search(api.SearchIn{Query: "zebra crossing", Mode: "text"}))
	if len(got) != 1 || got[0] != want[0] {
		t.Fatalf("after index corruption, search = %v", got)
	}
}

// A crash between the store commit and the index write leaves the index
// behind the store; start-up must notice and catch up before answering.
func TestLaggingIndexCatchesUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := startServer(t, dir)
	first.store("lag", msg("user", "first message indexed normally"))
	first.Stop()

	// Write to the store alone, as if the process died before indexing.
	st, err := boltstore.Open(filepath.Join(dir, "ctxd.db"), false)
	if err != nil {
		t.Fatal(err)
	}
	lost := &memory.Message{ID: "01LAGGED0000000000000000001", Role: memory.RoleUser, Content: "the hummingbird migration data arrived",
		State: memory.StateActive, Tokens: 9, CreatedAt: first.now()}
	if _, err := st.Append(t.Context(), memory.DefaultTenant, "lag", nil, []*memory.Message{lost}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	ts := startServer(t, dir)
	got := idsOf(ts.search(api.SearchIn{Query: "hummingbird migration", Mode: "text"}))
	if len(got) != 1 || got[0] != lost.ID {
		t.Fatalf("lagging index not caught up at start: %v", got)
	}
	var ready api.Ready
	ts.call(200, "GET", "/readyz", nil, &ready)
}

// With --expansion-weight, hybrid search within a session also finds a
// word's neighbours in the embedded GloVe model by their words ("automobile"
// finds a car), and the snippet marks them; across sessions it does not.
func TestSearchQueryExpansion(t *testing.T) {
	t.Parallel()
	for _, w := range []float64{0, 0.5} {
		ts := startServer(t, t.TempDir(), func(c *server.Config) { c.ExpansionWeight = w })
		ts.putSession("e", map[string]any{})
		ts.store("e", msg("user", "my car broke down on the motorway"), msg("user", "we had soup for lunch"))
		snippets := func(in api.SearchIn) []string {
			var out []string
			for _, r := range ts.search(in) {
				out = append(out, r.Highlight)
			}
			return out
		}
		plain := []string{"my car broke down on the motorway", "we had soup for lunch"}
		want := slices.Clone(plain)
		if w > 0 {
			want[0] = "my «car» broke down on the motorway"
		}
		if got := snippets(api.SearchIn{Query: "automobile", SessionID: "e"}); !slices.Equal(got, want) {
			t.Errorf("expansion weight %v, in the session: snippets %q, want %q", w, got, want)
		}
		if got := snippets(api.SearchIn{Query: "automobile"}); !slices.Equal(got, plain) {
			t.Errorf("expansion weight %v, across sessions: snippets %q, want %q", w, got, plain)
		}
	}
}

// Each search result says why it ranks: score_parts has both sides' scores
// and what its neighbouring turns added.
func TestSearchScoreParts(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("p", map[string]any{})
	ts.store("p", msg("user", "who has the pager this week?"), msg("assistant", "Dana, until Friday."), msg("user", "thanks, and the garden?"))
	res := ts.search(api.SearchIn{Query: "pager this week", SessionID: "p", K: 2})
	if len(res) != 2 {
		t.Fatalf("%d results", len(res))
	}
	for i, want := range []string{"who has the pager this week?", "Dana, until Friday."} {
		r := res[i]
		parts := r.ScoreParts
		if r.Content != want || parts == nil {
			t.Fatalf("result %d: %+v, want %q with score_parts", i, r, want)
		}
		fused := 0.7*parts.Text + 0.3*parts.Vector
		if want := (fused + parts.Neighbor + parts.When) * parts.Author; math.Abs(r.Score-want) > 1e-9 {
			t.Errorf("result %d: score %v is not (0.7 text + 0.3 vector + neighbor + when) * author (%+v)", i, r.Score, parts)
		}
	}
	if n := res[1].ScoreParts.Neighbor; n <= 0 {
		t.Errorf("the answer after the matched question got nothing from it: %v", n)
	}
}
