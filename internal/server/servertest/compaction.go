package servertest

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// CheckNoOverlappingCompactions reads the compaction log of the server
// whose data dir is dir: one session's compactions (every session's, for
// session "") must run one after another, and there must be several.
func CheckNoOverlappingCompactions(tb testing.TB, dir, session string) {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "logs", "compaction.jsonl"))
	if err != nil {
		tb.Fatal(err)
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
			tb.Fatalf("compaction log line %q: %v", line, err)
		}
		if session == "" || ev.Session == session {
			spans = append(spans, span{ev.StartedAt, ev.Time})
		}
	}
	if len(spans) < 2 {
		tb.Fatalf("%d compactions logged, want several", len(spans))
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	for i := 1; i < len(spans); i++ {
		if spans[i].start.Before(spans[i-1].end) {
			tb.Fatalf("compactions overlap: %v-%v and %v-%v", spans[i-1].start, spans[i-1].end, spans[i].start, spans[i].end)
		}
	}
	tb.Logf("%d compactions of %q, none overlapping", len(spans), session)
}

// DropInStore moves messages of the default tenant's session to cold
// storage straight in st, as a compaction would, at now (the index learns
// of it with the next write).
func DropInStore(tb testing.TB, st memory.Store, now time.Time, session string, ids ...string) {
	tb.Helper()
	ctx := memory.NewContextWithTenant(tb.Context(), memory.DefaultTenant)
	if _, err := st.Update(ctx, memory.DefaultTenant, session, func(tx memory.SessionTx) error {
		for _, id := range ids {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			m.State = memory.StateDropped
			m.Cold = &memory.ColdInfo{DropReason: memory.ReasonLowRelevance, DroppedAt: now, RecoverableUntil: now.Add(time.Hour)}
			if err := tx.Put(m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		tb.Fatal(err)
	}
}
