package boltstore_test

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
)

// imported is a session as an export carries it: messages in every state,
// with gaps in seq (purged messages), cold info and counters to recompute.
func imported() (*memory.Session, []*memory.Message) {
	at := time.Date(2024, 5, 7, 14, 0, 0, 0, time.UTC)
	sess := &memory.Session{Tenant: "t", ID: "s", ContextWindow: 4000, Encoding: memory.EncodingCL100k, LastSeq: 9,
		AssistantTurns: 2, Compactions: 1, Tokens: 999, Counts: memory.Counts{Active: 50}, CreatedAt: at, UpdatedAt: at.Add(time.Hour),
		Metadata: map[string]any{"k": "v"}}
	cold := &memory.ColdInfo{DropReason: memory.ReasonSummarized, SummaryID: "m9", DroppedAt: at, RecoverableUntil: at.AddDate(0, 0, 30)}
	ms := []*memory.Message{
		{ID: "m1", Seq: 1, Role: memory.RoleUser, Content: "one", Tokens: 10, State: memory.StateActive, Vector: []float32{1, 0}},
		{ID: "m3", Seq: 3, Role: memory.RoleAssistant, Content: "three", Tokens: 20, State: memory.StateSummarized, Cold: cold, Turn: 0},
		{ID: "m4", Seq: 4, Role: memory.RoleUser, Content: "four", Tokens: 30, State: memory.StateRecovered, Turn: 1, Vector: []float32{0, 1}},
		{ID: "m9", Seq: 9, Role: memory.RoleAssistant, Content: "summary", Tokens: 5, State: memory.StateActive, Kind: memory.KindSummary,
			Sources: []string{"m3"}, Anchor: 3, Turn: 1},
	}
	for _, m := range ms {
		m.Tenant, m.SessionID, m.CreatedAt = "t", "s", at
	}
	return sess, ms
}

func TestImportKeepsIDsSeqsAndStates(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	sess, ms := imported()
	before, _ := s.LastSeq(ctx)
	got, err := s.Import(ctx, sess, ms)
	if err != nil {
		t.Fatal(err)
	}
	// Counters follow the messages, not what the file said.
	if got.Tokens != 10+30+5 || got.Counts != (memory.Counts{Active: 2, Summarized: 1, Recovered: 1}) || got.Summaries != 1 {
		t.Fatalf("imported session counters = tokens %d, %+v, summaries %d", got.Tokens, got.Counts, got.Summaries)
	}
	if got.LastSeq != 9 || got.AssistantTurns != 2 || got.Compactions != 1 || !got.UpdatedAt.Equal(sess.UpdatedAt) {
		t.Fatalf("imported session settings = %+v", got)
	}
	stored, err := s.Messages(ctx, "t", "s", memory.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range stored {
		want := *ms[i]
		want.Vector = nil
		if !reflect.DeepEqual(*stored[i], want) {
			t.Errorf("message %d stored as %+v, want %+v", i, stored[i], want)
		}
	}
	withVec, _ := s.MessagesByID(ctx, "t", []string{"m4", "m3"}, true)
	if len(withVec) != 2 || !reflect.DeepEqual(withVec[0].Vector, []float32{0, 1}) || withVec[1].Vector != nil {
		t.Fatalf("vectors after import = %+v", withVec)
	}
	cold, _ := s.Messages(ctx, "t", "s", memory.MessageQuery{States: []memory.State{memory.StateSummarized}})
	if len(cold) != 1 || cold[0].ID != "m3" {
		t.Fatalf("the state index after import lists %+v", cold)
	}
	// One upsert per message, so the indexes follow.
	changes, _ := s.Changes(ctx, before, 0)
	if len(changes) != len(ms) || changes[0].Op != memory.ChangeUpsert || changes[0].MessageID != "m1" {
		t.Fatalf("change log after import = %+v", changes)
	}
	// A session appended to after an import continues after its last seq.
	next, err := s.Append(ctx, "t", "s", nil, []*memory.Message{{ID: "m10", Role: memory.RoleUser, State: memory.StateActive}})
	if err != nil || next.LastSeq != 10 {
		t.Fatalf("append after import: %+v, %v", next, err)
	}
}

func TestImportRefusesWhatExists(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	sess, ms := imported()
	if _, err := s.Import(ctx, sess, ms); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, sess, ms); memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatalf("import of an existing session: %v, want conflict", err)
	}
	// Another session reusing a message id: refused, and nothing of it lands.
	other, ms2 := imported()
	other.ID = "s2"
	for _, m := range ms2 {
		m.SessionID, m.ID = "s2", m.ID+"-2"
	}
	ms2[2].ID = "m1"
	last, _ := s.LastSeq(ctx)
	if _, err := s.Import(ctx, other, ms2); memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatalf("import reusing a message id: %v, want conflict", err)
	}
	if _, err := s.Session(ctx, "t", "s2"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("a refused import left its session: %v", err)
	}
	if now, _ := s.LastSeq(ctx); now != last {
		t.Fatalf("a refused import logged changes: %d -> %d", last, now)
	}
	// Repeated seqs and messages of another session are not an export's.
	bad, ms3 := imported()
	bad.ID = "s3"
	for _, m := range ms3 {
		m.SessionID, m.ID = "s3", m.ID+"-3"
	}
	ms3[1].Seq = 1
	if _, err := s.Import(ctx, bad, ms3); memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("import with a repeated seq: %v, want invalid", err)
	}
	ms3[1].Seq, ms3[1].SessionID = 3, "s"
	if _, err := s.Import(ctx, bad, ms3); memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("import with another session's message: %v, want invalid", err)
	}
}

// A store another process (or another Open) holds is refused after the lock
// timeout with a message naming the data dir.
func TestOpenHeldStoreSaysInUse(t *testing.T) {
	dir := t.TempDir()
	mustOpen(t, filepath.Join(dir, "ctxd.db"))
	_, err := boltstore.Open(filepath.Join(dir, "ctxd.db"), false)
	if memory.ErrorCode(err) != memory.EUNAVAILABLE || !strings.Contains(err.Error(), "data dir "+dir+" is in use (is a ctxd server running? stop it first)") {
		t.Fatalf("second open: %v", err)
	}
}
