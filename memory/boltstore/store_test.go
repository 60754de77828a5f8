package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
)

func mustOpen(tb testing.TB, path string) *boltstore.Store {
	tb.Helper()
	s, err := boltstore.Open(path, false)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := s.Check(); err != nil {
			tb.Error(err)
		}
		s.Close()
	})
	return s
}

func newSession(tenant, id string) func() *memory.Session {
	return func() *memory.Session {
		return &memory.Session{Tenant: tenant, ID: id, ContextWindow: 1000, Encoding: memory.EncodingO200k}
	}
}

func msgs(prefix string, n int) []*memory.Message {
	out := make([]*memory.Message, n)
	for i := range out {
		out[i] = &memory.Message{ID: fmt.Sprintf("%s-%03d", prefix, i), Role: memory.RoleUser,
			Content: fmt.Sprintf("message %d", i), Tokens: 10, State: memory.StateActive,
			CreatedAt: time.Unix(int64(1000+i), 0).UTC(), Vector: []float32{float32(i), 1}}
	}
	return out
}

func TestAppendAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ctxd.db")
	s, err := boltstore.Open(path, false)
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.Append(ctx, "t1", "s1", newSession("t1", "s1"), msgs("a", 5))
	if err != nil {
		t.Fatal(err)
	}
	if sess.Tokens != 50 || sess.Counts.Active != 5 || sess.LastSeq != 5 {
		t.Fatalf("session after append = %+v", sess)
	}
	s.Close()

	s = mustOpen(t, path)
	got, err := s.Messages(ctx, "t1", "s1", memory.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("reopened store has %d messages, want 5", len(got))
	}
	for i, m := range got {
		if m.Seq != uint64(i+1) || m.ID != fmt.Sprintf("a-%03d", i) || m.SessionID != "s1" || m.Tenant != "t1" {
			t.Errorf("message %d = %+v", i, m)
		}
	}
	withVec, err := s.MessagesByID(ctx, "t1", []string{"a-003"}, true)
	if err != nil || len(withVec) != 1 || withVec[0].Vector[0] != 3 {
		t.Fatalf("MessagesByID with vectors = %+v, %v", withVec, err)
	}
}

func TestAppendIsAtomic(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	if _, err := s.Append(ctx, "t", "s", newSession("t", "s"), msgs("a", 2)); err != nil {
		t.Fatal(err)
	}
	// The second batch reuses an id in its last message: nothing of it may land.
	batch := msgs("b", 3)
	batch[2].ID = "a-000"
	_, err := s.Append(ctx, "t", "s", newSession("t", "s"), batch)
	if memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatalf("duplicate id: err = %v, want conflict", err)
	}
	got, _ := s.Messages(ctx, "t", "s", memory.MessageQuery{})
	if len(got) != 2 {
		t.Fatalf("after a refused batch the session has %d messages, want 2", len(got))
	}
	sess, _ := s.Session(ctx, "t", "s")
	if sess.Tokens != 20 || sess.LastSeq != 2 {
		t.Fatalf("session totals changed by a refused batch: %+v", sess)
	}
}

func TestTenantsAndSessionsAreIsolated(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	for _, c := range []struct{ tenant, id, prefix string }{{"t1", "s", "x"}, {"t2", "s", "y"}, {"t1", "s2", "z"}, {"t1", "s.2", "w"}} {
		if _, err := s.Append(ctx, c.tenant, c.id, newSession(c.tenant, c.id), msgs(c.prefix, 3)); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := s.Messages(ctx, "t1", "s", memory.MessageQuery{})
	for _, m := range got {
		if m.ID[0] != 'x' {
			t.Fatalf("t1/s lists %s", m.ID)
		}
	}
	if len(got) != 3 {
		t.Fatalf("t1/s has %d messages", len(got))
	}
	if other, _ := s.MessagesByID(ctx, "t2", []string{"x-000"}, false); len(other) != 0 {
		t.Fatal("tenant t2 read a t1 message by id")
	}
	list, _ := s.Sessions(ctx, "t1", "", 0)
	if len(list) != 3 {
		t.Fatalf("t1 lists %d sessions, want 3", len(list))
	}

	if err := s.DeleteSession(ctx, "t1", "s"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Session(ctx, "t1", "s"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("deleted session: %v", err)
	}
	for _, c := range []struct{ tenant, id string }{{"t2", "s"}, {"t1", "s2"}, {"t1", "s.2"}} {
		got, err := s.Messages(ctx, c.tenant, c.id, memory.MessageQuery{})
		if err != nil || len(got) != 3 {
			t.Fatalf("%s/%s after deleting t1/s: %d messages, %v", c.tenant, c.id, len(got), err)
		}
	}
	if gone, _ := s.MessagesByID(ctx, "t1", []string{"x-001"}, true); len(gone) != 0 {
		t.Fatal("a deleted session's message is still found by id")
	}
}

func TestChangeLog(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	if _, err := s.Append(ctx, "t", "s", newSession("t", "s"), msgs("a", 3)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(ctx, "t", "s"); err != nil {
		t.Fatal(err)
	}
	changes, err := s.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(changes) != 4 || changes[3].Op != memory.ChangeDeleteSession || changes[0].MessageID != "a-000" {
		t.Fatalf("changes = %+v", changes)
	}
	if err := s.TrimChanges(ctx, 2); err != nil {
		t.Fatal(err)
	}
	rest, _ := s.Changes(ctx, 0, 0)
	if len(rest) != 2 || rest[0].Seq != 3 {
		t.Fatalf("after trim: %+v", rest)
	}
	last, _ := s.LastSeq(ctx)
	if last != 4 {
		t.Fatalf("LastSeq = %d, want 4 (trims keep the sequence)", last)
	}
}

func TestSecondOpenIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ctxd.db")
	mustOpen(t, path)
	_, err := boltstore.Open(path, false)
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("second open: %v, want a clear unavailable error", err)
	}
}

func BenchmarkAppend100(b *testing.B) {
	ctx := context.Background()
	s := mustOpen(b, filepath.Join(b.TempDir(), "ctxd.db"))
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		batch := msgs(fmt.Sprintf("b%d", i), 100)
		i++
		if _, err := s.Append(ctx, "t", "s", newSession("t", "s"), batch); err != nil {
			b.Fatal(err)
		}
	}
}

func TestUpdateMovesStatesAndCounters(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	if _, err := s.Append(ctx, "t", "s", newSession("t", "s"), msgs("a", 10)); err != nil {
		t.Fatal(err)
	}
	sess, err := s.Update(ctx, "t", "s", func(tx memory.SessionTx) error {
		for _, id := range []string{"a-002", "a-005", "a-007"} {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			m.State = memory.StateDropped
			if err := tx.Put(m); err != nil {
				return err
			}
		}
		return tx.Append(&memory.Message{ID: "sum-1", Role: memory.RoleAssistant, Content: "summary", Kind: memory.KindSummary,
			State: memory.StateActive, Tokens: 4, Sources: []string{"a-002"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Counts.Active != 8 || sess.Counts.Dropped != 3 || sess.Tokens != 74 || sess.Summaries != 1 || sess.LastSeq != 11 {
		t.Fatalf("session after update = %+v", sess)
	}
	dropped, _ := s.Messages(ctx, "t", "s", memory.MessageQuery{States: []memory.State{memory.StateDropped}})
	if fmt.Sprint(idsOf(dropped)) != "[a-002 a-005 a-007]" {
		t.Fatalf("dropped = %v", idsOf(dropped))
	}
	page, _ := s.Messages(ctx, "t", "s", memory.MessageQuery{States: []memory.State{memory.StateDropped, memory.StateActive}, AfterSeq: 3, Limit: 3})
	if fmt.Sprint(idsOf(page)) != "[a-003 a-004 a-005]" {
		t.Fatalf("mixed-state page = %v", idsOf(page))
	}
	// An error inside Update rolls everything back.
	_, err = s.Update(ctx, "t", "s", func(tx memory.SessionTx) error {
		m, _ := tx.Message("a-000")
		m.State = memory.StateDropped
		tx.Put(m)
		return memory.Errorf(memory.ECONFLICT, "changed my mind")
	})
	if memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatal(err)
	}
	after, _ := s.Session(ctx, "t", "s")
	if after.Counts.Dropped != 3 {
		t.Fatalf("a rolled-back update changed counts: %+v", after.Counts)
	}
	if err := s.DeleteSession(ctx, "t", "s"); err != nil {
		t.Fatal(err)
	}
}

func idsOf(ms []*memory.Message) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
