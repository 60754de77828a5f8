package server_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

func TestAutoCompactionUnderBudget(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), thirtyDays)
	// A low cutoff sends the middle band to summaries rather than drops, so
	// both paths run.
	ts.putSession("auto", map[string]any{"context_window": 2000, "relevance_cutoff": 0.06})
	var acked []string
	acked = append(acked, ts.store("auto", api.MessageIn{Role: "system", Content: "You are a helpful assistant.", Pinned: true})...)
	acked = append(acked, ts.store("auto", msg("user", "My project is called Bluefin and its repo is at /srv/bluefin."))...)
	compactions := 0
	for i := 0; i < 120; i++ {
		out := ts.append("auto", turn(i))
		acked = append(acked, out.IDs[0])
		if out.Session.Tokens >= 0.85*2000 {
			t.Fatalf("after write %d the window is %v tokens, past the hard limit", i, out.Session.Tokens)
		}
		if c := out.Compaction; c != nil {
			compactions++
			if c.TokensAfter > c.Target && !c.ProtectedOnly {
				t.Fatalf("compaction left %v tokens over target %v: %+v", c.TokensAfter, c.Target, c)
			}
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction ran")
	}
	servertest.CheckReachable(t, ts.allMessages("auto"), acked)
	if st := ts.session("auto"); st.Compactions < 1 || st.Summaries < 1 || st.Messages.Dropped < 1 {
		t.Fatalf("status after compactions = %+v", st)
	}
	// The pinned system prompt and the first user message never leave.
	var window api.MessageList
	ts.call(200, "GET", "/v1/sessions/auto/messages?state=active", nil, &window)
	if window.Messages[0].ID != acked[0] || window.Messages[1].ID != acked[1] {
		t.Fatalf("protected messages left the window: %+v", window.Messages[:2])
	}
	// Summaries are searchable and carry their sources.
	foundSummary := false
	for _, r := range ts.search(api.SearchIn{Query: "summary of messages weather river walked", SessionID: "auto", K: 100}) {
		if r.Kind == "summary" && len(r.Sources) > 0 {
			foundSummary = true
		}
	}
	if !foundSummary {
		t.Fatal("no summary found by search")
	}
	// Event logs and the cold mirror exist and hold what happened.
	events := readEvents(t, filepath.Join(ts.Dir, "logs", "compaction.jsonl"))
	if len(events) != compactions || events[0]["trigger"] != "auto" || events[0]["config"] == nil {
		t.Fatalf("compaction log has %d events (want %d): %v", len(events), compactions, events[0])
	}
	drops := readEvents(t, filepath.Join(ts.Dir, "logs", "drops.jsonl"))
	if len(drops) == 0 || drops[0]["reason"] == nil || drops[0]["threshold"] == nil {
		t.Fatalf("drops log = %v", drops)
	}
	cold := ts.cold("auto", "?limit=1000")
	if len(cold) == 0 {
		t.Fatal("nothing cold")
	}
	if servertest.HasMirror(ts.Dir) {
		mirror := readMirror(t, filepath.Join(ts.Dir, "cold", "default", "auto.jsonl.gz"))
		inMirror := map[string]bool{}
		for _, c := range mirror {
			inMirror[c["chunk_id"].(string)] = true
		}
		for _, c := range cold {
			if !inMirror[c.ID] {
				t.Fatalf("cold chunk %+v is missing from the mirror", c)
			}
		}
		for _, k := range []string{"chunk_id", "session_id", "timestamp", "content", "tokens", "drop_reason", "relevance_score", "prompt_at_drop", "recoverable_until"} {
			if _, ok := mirror[0][k]; !ok {
				t.Fatalf("cold chunk lacks %s: %v", k, mirror[0])
			}
		}
	}
	if d := cold[0].RecoverableUntil.Sub(ts.now()); d < 29*24*time.Hour || d > 31*24*time.Hour {
		t.Fatalf("recoverable_until %v is not 30 days out", cold[0].RecoverableUntil)
	}
}

func TestCompactDryRunAndProtection(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.putSession("d", map[string]any{"context_window": 100000, "keep_recent": 4})
	ids := ts.store("d",
		api.MessageIn{Role: "system", Content: "Rules: never delete production data."},
		msg("user", "first question about the billing service"),
		api.MessageIn{Role: "user", Content: "the API key lives in vault path secret/billing", Important: true},
	)
	for i := 0; i < 30; i++ {
		ids = append(ids, ts.store("d", turn(i))...)
	}
	ids = append(ids, ts.store("d", api.MessageIn{Role: "assistant", ToolCalls: []memory.ToolCall{
		{ID: "c9", Type: "function", Function: memory.FunctionCall{Name: "read_file", Arguments: `{"path":"/srv/a"}`}}}},
		api.MessageIn{Role: "tool", ToolCallID: "c9", Content: "file contents here"},
		msg("user", "thanks"), msg("assistant", "you are welcome"), msg("user", "one more"))...)
	// Force a compaction by lowering the window below what is stored.
	ts.putSession("d", map[string]any{"context_window": 2000})
	var rep memory.CompactionReport
	ts.call(200, "POST", "/v1/sessions/d/compact", api.CompactIn{Prompt: "billing vault secret", DryRun: true}, &rep)
	if !rep.DryRun || len(rep.Scores) == 0 {
		t.Fatalf("dry run report = %+v", rep)
	}
	for _, s := range rep.Scores {
		if s.Decision != "protected" && s.Components == nil {
			t.Fatalf("scored message without components: %+v", s)
		}
	}
	ts.putSession("d", map[string]any{"context_window": 100000})
	for _, m := range ts.allMessages("d") {
		if m.State != memory.StateActive {
			t.Fatalf("dry run changed %+v", m)
		}
	}
	ts.putSession("d", map[string]any{"context_window": 2000})
	rep = memory.CompactionReport{}
	ts.call(200, "POST", "/v1/sessions/d/compact", api.CompactIn{Prompt: "billing vault secret"}, &rep)
	gone := map[string]bool{}
	for _, id := range append(rep.Dropped, rep.Summarized...) {
		gone[id] = true
	}
	if len(gone) == 0 {
		t.Fatalf("compaction changed nothing: %+v", rep)
	}
	n := len(ids)
	protected := append([]string{ids[0], ids[1], ids[2]}, ids[n-5:]...) // system, first user, important, tool group + last 4
	for _, id := range protected {
		if gone[id] {
			t.Fatalf("protected message %s was compacted", id)
		}
	}
	// The tool call and its result stay together.
	if gone[ids[n-5]] != gone[ids[n-4]] {
		t.Fatal("a tool call was separated from its result")
	}
	servertest.CheckReachable(t, ts.allMessages("d"), ids)
}

func TestRecoverAndFlush(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), thirtyDays)
	// Flush at 1500-300 tokens: above the 1050-token target a compaction
	// leaves, so one cycle tells the agent once.
	ts.putSession("f", map[string]any{"context_window": 3000, "flush_threshold_tokens": 300})
	var acked []string
	flushes := 0
	compacted := false
	for i := 0; i < 80 && !compacted; i++ {
		out := ts.append("f", msg("user", chatter(i)))
		acked = append(acked, out.IDs[0])
		if st := out.Session; st.FlushPrompt != "" {
			flushes++
			if st.State != "flush_due" || !strings.Contains(st.FlushPrompt, "pinned notes") {
				t.Fatalf("flush status = %+v", st)
			}
			// The agent saves a durable note: it is pinned and never compacted.
			acked = append(acked, ts.store("f", api.MessageIn{Role: "assistant", Content: "NOTE: user walks by the river", Pinned: true})...)
		}
		compacted = out.Compaction != nil
	}
	if flushes != 1 {
		t.Fatalf("told to flush %d times in one cycle, want once", flushes)
	}
	if !compacted {
		t.Fatal("no compaction")
	}
	cold := ts.cold("f", "")
	if len(cold) == 0 {
		t.Fatal("nothing cold after compaction")
	}
	c := cold[0]
	// prompt_at_drop may be empty, never absent.
	var fields struct{ Chunks []map[string]json.RawMessage }
	if err := json.Unmarshal(ts.do("GET", "/v1/sessions/f/cold", nil).Raw, &fields); err != nil || len(fields.Chunks) == 0 {
		t.Fatalf("cold listing: %v", err)
	}
	if _, ok := fields.Chunks[0]["prompt_at_drop"]; c.DropReason == "" || !ok {
		t.Fatalf("cold chunk = %+v", c)
	}
	var m api.Message
	ts.call(200, "POST", "/v1/sessions/f/messages/"+c.ID+"/recover", nil, &m)
	if m.State != memory.StateRecovered || m.ID != c.ID {
		t.Fatalf("recovered = %+v", m)
	}
	var again api.Message
	ts.call(200, "POST", "/v1/sessions/f/messages/"+c.ID+"/recover", nil, &again)
	if again.State != memory.StateRecovered {
		t.Fatalf("second recovery = %+v", again)
	}
	ts.call(404, "POST", "/v1/sessions/f/messages/01NOPE/recover", nil, nil)
	ts.call(404, "POST", "/v1/sessions/other/messages/"+c.ID+"/recover", nil, nil)
	if recs := readEvents(t, filepath.Join(ts.Dir, "logs", "recoveries.jsonl")); len(recs) != 1 || recs[0]["chunk"] != c.ID {
		t.Fatalf("recoveries log = %v", recs)
	}
	pinned := 0
	for _, m := range ts.allMessages("f") {
		if m.Pinned && m.State != memory.StateActive {
			t.Fatalf("pinned note compacted: %+v", m)
		}
		if m.Pinned {
			pinned++
		}
	}
	if pinned != 1 {
		t.Fatalf("%d pinned notes", pinned)
	}
	servertest.CheckReachable(t, ts.allMessages("f"), acked)

	// After the TTL the purge removes cold chunks from the store and the
	// indexes, and logs them.
	n, err := ts.Main.Service.Purge(t.Context(), ts.now().AddDate(0, 0, 31))
	if err != nil || n == 0 {
		t.Fatalf("purge = %d, %v", n, err)
	}
	if left := ts.cold("f", ""); len(left) != 0 {
		t.Fatalf("%d cold chunks left after purge", len(left))
	}
	if p := readEvents(t, filepath.Join(ts.Dir, "logs", "purges.jsonl")); len(p) != n {
		t.Fatalf("purge log has %d lines for %d purged", len(p), n)
	}
	for _, mode := range []string{"text", "vector"} {
		for _, r := range ts.search(api.SearchIn{Query: c.Content, SessionID: "f", Mode: mode, K: 100}) {
			if r.ID == c.ID && r.State != memory.StateRecovered {
				t.Fatalf("purged chunk still found by %s search", mode)
			}
		}
	}
	if st := ts.session("f"); st.Messages.Dropped+st.Messages.Summarized != 0 {
		t.Fatalf("counts after purge = %+v", st.Messages)
	}
}
