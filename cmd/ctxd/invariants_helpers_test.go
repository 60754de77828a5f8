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

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// checkCounters asserts the session status agrees with its messages: counts
// per state, summaries, and no id twice.
func checkCounters(t *testing.T, ts *testServer, session string) []api.Message {
	t.Helper()
	// Background compactions may still run (queued behind the compaction
	// bound): wait for them in process; a child process's are read on both
	// sides of the status until they agree.
	if ts.Main != nil {
		if err := ts.Main.Service.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []api.Message
	var st *memory.Status
	for range 100 {
		msgs = allMessages(ts, session)
		st = servertest.Status(t, ts.URL, ts.Header, session)
		if fmt.Sprint(allMessages(ts, session)) == fmt.Sprint(msgs) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	servertest.CheckCounters(t, st, msgs)
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
