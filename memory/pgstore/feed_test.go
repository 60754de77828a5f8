package pgstore

import (
	"context"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/storetest"
)

// TestFeedWaitsForWritesInFlight: a write that queued its change before
// another write but commits after it is not skipped by a reader that read
// the other's: it is numbered after it. The write in flight is a
// transaction of its own here, queueing as a write would and committing
// when the test says; its commit without a numbering pass of its own (a
// node killed right after it) is numbered by the next LastSeq.
func TestFeedWaitsForWritesInFlight(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	storetestAppend(t, s, "a", "first")

	slow, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Rollback(ctx)
	err = queueChanges(ctx, slow, []memory.Change{{Op: memory.ChangeUpsert, Tenant: "t", SessionID: "slow", MessageID: "in-flight"}})
	if err != nil {
		t.Fatal(err)
	}
	storetestAppend(t, s, "b", "later") // queued after, committed before

	last, err := s.LastSeq(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen, err := s.Changes(ctx, 0, 0)
	if err != nil || len(seen) != 2 || seen[1].MessageID != "later-000" || last != 2 {
		t.Fatalf("before the slow write commits: LastSeq %d, changes %+v, %v", last, seen, err)
	}
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// No pass ran since: the reader's LastSeq numbers it, after what it saw.
	if last, err = s.LastSeq(ctx); err != nil || last != 3 {
		t.Fatalf("LastSeq after the slow write's commit = %d, %v; want 3", last, err)
	}
	rest, err := s.Changes(ctx, seen[1].Seq, 0)
	if err != nil || len(rest) != 1 || rest[0].MessageID != "in-flight" || rest[0].Seq != 3 {
		t.Fatalf("changes after the reader's watermark = %+v, %v; want the slow write's at 3", rest, err)
	}
}

func storetestAppend(t *testing.T, s *Store, session, prefix string) {
	t.Helper()
	if _, err := s.Append(context.Background(), "t", session, storetest.NewSession("t", session), storetest.Msgs(prefix, 1)); err != nil {
		t.Fatal(err)
	}
}
