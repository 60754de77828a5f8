package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

// checkCounters asserts the session status agrees with its messages: counts
// per state, summaries, and no id twice.
func checkCounters(t *testing.T, ts *testServer, session string) []map[string]any {
	t.Helper()
	// Background compactions may still run (queued behind the compaction
	// bound): wait for them in process; a child process's are read on both
	// sides of the status until they agree.
	if ts.Main != nil {
		if err := ts.Main.Service.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []map[string]any
	var st map[string]any
	for range 100 {
		msgs = allMessages(ts, session)
		st = ts.mustDo(200, "GET", "/v1/sessions/"+session, nil)
		if fmt.Sprint(allMessages(ts, session)) == fmt.Sprint(msgs) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	counts := map[string]float64{}
	summaries := 0.0
	seen := map[string]bool{}
	for _, m := range msgs {
		id := m["id"].(string)
		if seen[id] {
			t.Fatalf("message %s listed twice", id)
		}
		seen[id] = true
		counts[m["state"].(string)]++
		if m["kind"] == "summary" {
			summaries++
		}
	}
	sc := st["messages"].(map[string]any)
	for _, state := range []string{"active", "summarized", "dropped", "recovered"} {
		if sc[state].(float64) != counts[state] {
			t.Fatalf("status says %v %s, messages say %v", sc[state], state, counts[state])
		}
	}
	if st["summaries"].(float64) != summaries {
		t.Fatalf("status says %v summaries, messages say %v", st["summaries"], summaries)
	}
	return msgs
}

// checkNoOverlappingCompactions reads the compaction log: one session's
// compactions (every session's, for session "") must run one after another.
func checkNoOverlappingCompactions(t *testing.T, dir, session string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "logs", "compaction.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	type span struct{ start, end time.Time }
	var spans []span
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var ev struct {
			Session   string    `json:"session"`
			StartedAt time.Time `json:"started_at"`
			Time      time.Time `json:"time"`
		}
		if err := json.Unmarshal(line, &ev); err != nil {
			t.Fatalf("compaction log line %q: %v", line, err)
		}
		if session == "" || ev.Session == session { // "": every session
			spans = append(spans, span{ev.StartedAt, ev.Time})
		}
	}
	if len(spans) < 2 {
		t.Fatalf("%d compactions logged, want several", len(spans))
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			t.Fatalf("compactions overlap: %v-%v and %v-%v", spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
	t.Logf("%d compactions of %s, none overlapping", len(spans), session)
}
