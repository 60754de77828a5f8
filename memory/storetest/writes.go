package storetest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

func testAppend(t *testing.T, s memory.Store) {
	msgs := Msgs("a", 3)
	msgs[1].Role = memory.RoleAssistant
	msgs[2].Role, msgs[2].ToolCallID = memory.RoleTool, "c1"
	sess := mustAppend(t, s, "t1", "s1", msgs)
	if sess.LastSeq != 3 || sess.Tokens != 30 || sess.Counts.Active != 3 || sess.AssistantTurns != 1 {
		t.Fatalf("session after append: last seq %d, tokens %d, counts %v, turns %d; want 3, 30, 3 active, 1",
			sess.LastSeq, sess.Tokens, sess.Counts, sess.AssistantTurns)
	}
	more := Msgs("b", 2)
	more[1].CreatedAt = time.Unix(9000, 0).UTC()
	sess = mustAppend(t, s, "t1", "s1", more)
	if sess.LastSeq != 5 || sess.Tokens != 50 || !sess.UpdatedAt.Equal(time.Unix(9000, 0)) {
		t.Fatalf("after a second append: last seq %d, tokens %d, updated %v", sess.LastSeq, sess.Tokens, sess.UpdatedAt)
	}
	got := mustMessages(t, s, "t1", "s1", memory.MessageQuery{})
	wantTurns := []int{0, 0, 1, 1, 1}
	for i, m := range got {
		if m.Seq != uint64(i+1) || m.Tenant != "t1" || m.SessionID != "s1" || m.Turn != wantTurns[i] {
			t.Errorf("message %d: seq %d tenant %q session %q turn %d", i, m.Seq, m.Tenant, m.SessionID, m.Turn)
		}
		if m.Vector != nil {
			t.Errorf("message %d has a vector without MessageQuery.Vectors", i)
		}
	}
	if !slices.Equal(ids(got), []string{"a-000", "a-001", "a-002", "b-000", "b-001"}) {
		t.Fatalf("messages in order = %v", ids(got))
	}
	if got[2].Role != memory.RoleTool || got[2].ToolCallID != "c1" || got[0].Content != "message 0 of a" || !got[0].CreatedAt.Equal(time.Unix(2000, 0)) {
		t.Fatalf("fields did not survive: %+v", got[2])
	}
	byID, err := s.MessagesByID(bg, "t1", []string{"b-001", "missing", "a-001"}, true)
	if err != nil || !slices.Equal(ids(byID), []string{"b-001", "a-001"}) {
		t.Fatalf("MessagesByID = %v, %v; want b-001, a-001 in the order asked", ids(byID), err)
	}
	if !sameVector(byID[0].Vector, []float32{2, 1}) {
		t.Fatalf("vector of b-001 = %v, want about [2 1]", byID[0].Vector)
	}
	persisted := mustSession(t, s, "t1", "s1")
	if persisted.LastSeq != 5 || persisted.Tokens != 50 || persisted.AssistantTurns != 1 {
		t.Fatalf("stored session differs from the answered one: %+v", persisted)
	}
	checkCounters(t, s, "t1", "s1")
}

func testAppendAtomic(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t1", "s1", Msgs("a", 2))
	before, _ := s.LastSeq(bg)
	batch := Msgs("b", 3)
	batch[2].ID = "a-000" // exists: the whole batch must go
	if _, err := s.Append(bg, "t1", "s1", NewSession("t1", "s1"), batch); memory.ErrorCode(err) != memory.ECONFLICT {
		t.Fatalf("append with an existing id: %v, want conflict", err)
	}
	if got := mustMessages(t, s, "t1", "s1", memory.MessageQuery{}); len(got) != 2 {
		t.Fatalf("a refused batch left %d messages, want the 2 from before", len(got))
	}
	if sess := mustSession(t, s, "t1", "s1"); sess.LastSeq != 2 || sess.Tokens != 20 {
		t.Fatalf("a refused batch moved the session: %+v", sess)
	}
	// A refused first write creates no session.
	bad := Msgs("c", 2)
	bad[1].ID = "c-000"
	if _, err := s.Append(bg, "t1", "new", NewSession("t1", "new"), bad); err == nil {
		t.Fatal("a batch repeating an id was stored")
	}
	if _, err := s.Session(bg, "t1", "new"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("a refused first write created its session: %v", err)
	}
	if after, _ := s.LastSeq(bg); after != before {
		t.Fatalf("refused writes logged changes: last seq %d -> %d", before, after)
	}
	checkCounters(t, s, "t1", "s1")
}

func testWriteRollsBack(t *testing.T, s memory.Store) {
	_, err := s.Write(bg, "t1", "w", NewSession("t1", "w"), func(tx memory.SessionTx) error {
		for _, m := range Msgs("a", 2) {
			if err := tx.Append(m); err != nil {
				return err
			}
		}
		return errRefused
	})
	if !isRefused(err) {
		t.Fatalf("Write whose fn failed: %v, want the fn's error", err)
	}
	if _, err := s.Session(bg, "t1", "w"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("a failed Write saved its new session: %v", err)
	}
	mustAppend(t, s, "t1", "w", Msgs("b", 1))
	_, err = s.Update(bg, "t1", "w", func(tx memory.SessionTx) error {
		tx.Session().Compactions = 7
		if err := tx.Append(Msgs("c", 1)[0]); err != nil {
			return err
		}
		return errRefused
	})
	if !isRefused(err) {
		t.Fatalf("Update whose fn failed: %v", err)
	}
	if sess := mustSession(t, s, "t1", "w"); sess.Compactions != 0 || sess.LastSeq != 1 {
		t.Fatalf("a failed Update changed the session: compactions %d, last seq %d", sess.Compactions, sess.LastSeq)
	}
	if got := mustMessages(t, s, "t1", "w", memory.MessageQuery{}); len(got) != 1 {
		t.Fatalf("a failed Update kept %d messages", len(got))
	}
	_, err = s.Update(bg, "t1", "missing", func(memory.SessionTx) error { return nil })
	wantCode(t, "Update of a missing session", err, memory.ENOTFOUND)
	// Within one transaction, its own writes are read back.
	sess, err := s.Update(bg, "t1", "w", func(tx memory.SessionTx) error {
		m := Msgs("d", 1)[0]
		if err := tx.Append(m); err != nil {
			return err
		}
		if m.Seq != 2 {
			t.Errorf("tx.Append gave seq %d, want 2", m.Seq)
		}
		got, err := tx.Message("d-000")
		if err != nil || got.Content != m.Content {
			t.Errorf("tx.Message of a message appended in the tx: %v, %v", got, err)
		}
		all, err := tx.Messages(memory.MessageQuery{})
		if err != nil || len(all) != 2 {
			t.Errorf("tx.Messages = %d messages, %v; want 2", len(all), err)
		}
		tx.Session().Compactions = 3
		return nil
	})
	if err != nil || sess.Compactions != 3 || sess.LastSeq != 2 {
		t.Fatalf("Update: %+v, %v", sess, err)
	}
	if got := mustSession(t, s, "t1", "w"); got.Compactions != 3 {
		t.Fatalf("a settings change in Update was not saved: %d", got.Compactions)
	}
	checkCounters(t, s, "t1", "w")
}

func testUpdateSession(t *testing.T, s memory.Store) {
	sess, err := s.UpdateSession(bg, "t1", "u", NewSession("t1", "u"), func(sess *memory.Session) error {
		sess.ContextWindow = 4096
		sess.Metadata = map[string]any{"team": "a"}
		return nil
	})
	if err != nil || sess.ContextWindow != 4096 {
		t.Fatalf("UpdateSession creating: %+v, %v", sess, err)
	}
	_, err = s.UpdateSession(bg, "t1", "u", NewSession("t1", "u"), func(sess *memory.Session) error {
		sess.ContextWindow = 1
		return errRefused
	})
	if !isRefused(err) {
		t.Fatalf("a refused UpdateSession: %v", err)
	}
	got := mustSession(t, s, "t1", "u")
	if got.ContextWindow != 4096 || got.Metadata["team"] != "a" || !got.CreatedAt.Equal(time.Unix(1000, 0)) {
		t.Fatalf("session after a refused update: %+v", got)
	}
	if err := s.DeleteSession(bg, "t1", "u"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "DeleteSession of a deleted session", s.DeleteSession(bg, "t1", "u"), memory.ENOTFOUND)
	_, err = s.Session(bg, "t1", "u")
	wantCode(t, "Session after delete", err, memory.ENOTFOUND)
}

// testStateMoves moves messages between states the way compaction,
// recovery and edits do, and checks every counter after each move.
func testStateMoves(t *testing.T, s memory.Store) {
	msgs := Msgs("a", 4)
	msgs[0].Pinned = true
	msgs[3].Role, msgs[3].ToolCallID, msgs[3].Prune = memory.RoleTool, "c", &memory.PruneCosts{Trimmed: 4, Cleared: 1}
	mustAppend(t, s, "t1", "s", msgs)
	_, err := s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		pinned := 0
		tx.Session().PinnedTokens = &pinned
		all, err := tx.Messages(memory.MessageQuery{})
		if err != nil {
			return err
		}
		// Count what is there now, as pinnedTotal does for an old session.
		for _, m := range all {
			pinned += memory.PinnedCost(m)
		}
		*tx.Session().PinnedTokens = pinned
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sess := mustSession(t, s, "t1", "s")
	if len(sess.Prunable) != 1 || sess.PinnedTokens == nil || *sess.PinnedTokens != 10 {
		t.Fatalf("prunable %v, pinned %v; want the tool result and 10", sess.Prunable, sess.PinnedTokens)
	}
	dropAt := time.Unix(5000, 0).UTC()
	sess, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		for _, id := range []string{"a-001", "a-002", "a-003"} {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			m.State = memory.StateSummarized
			m.Cold = &memory.ColdInfo{DropReason: memory.ReasonSummarized, DroppedAt: dropAt, SummaryID: "sum", PromptAtDrop: "why"}
			if err := tx.Put(m); err != nil {
				return err
			}
		}
		sum := &memory.Message{ID: "sum", Role: memory.RoleAssistant, Kind: memory.KindSummary, Content: "summary",
			Tokens: 7, State: memory.StateActive, Sources: []string{"a-001", "a-002", "a-003"}, Anchor: 2, CreatedAt: dropAt}
		return tx.Append(sum)
	})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Counts != (memory.Counts{Active: 2, Summarized: 3}) || sess.Tokens != 17 || sess.Summaries != 1 || len(sess.Prunable) != 0 {
		t.Fatalf("after summarizing: counts %v tokens %d summaries %d prunable %v", sess.Counts, sess.Tokens, sess.Summaries, sess.Prunable)
	}
	cold := mustMessages(t, s, "t1", "s", memory.MessageQuery{States: []memory.State{memory.StateSummarized}})
	if !slices.Equal(ids(cold), []string{"a-001", "a-002", "a-003"}) || cold[0].Cold == nil || cold[0].Cold.PromptAtDrop != "why" || !cold[0].Cold.DroppedAt.Equal(dropAt) {
		t.Fatalf("summarized messages = %v (cold %+v)", ids(cold), cold[0].Cold)
	}
	sess, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		m, err := tx.Message("a-002")
		if err != nil {
			return err
		}
		m.State, m.Content = memory.StateRecovered, "changed content"
		m.Vector = nil // Put keeps the stored vector
		return tx.Put(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	if sess.Counts != (memory.Counts{Active: 2, Summarized: 2, Recovered: 1}) || sess.Tokens != 27 {
		t.Fatalf("after recovering: counts %v tokens %d", sess.Counts, sess.Tokens)
	}
	got, err := s.MessagesByID(bg, "t1", []string{"a-002"}, true)
	if err != nil || len(got) != 1 || got[0].Content != "changed content" || got[0].Seq != 3 || !sameVector(got[0].Vector, []float32{3, 1}) {
		t.Fatalf("recovered message = %+v, %v", got, err)
	}
	// Put refuses a message the session does not have.
	_, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		return tx.Put(&memory.Message{ID: "nope", State: memory.StateActive})
	})
	wantCode(t, "Put of an unknown message", err, memory.ENOTFOUND)
	checkCounters(t, s, "t1", "s")
}

func testDeleteMessage(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t1", "s", Msgs("a", 3))
	sess, err := s.Update(bg, "t1", "s", func(tx memory.SessionTx) error { return tx.Delete("a-001") })
	if err != nil || sess.Counts.Active != 2 || sess.Tokens != 20 || sess.LastSeq != 3 {
		t.Fatalf("after delete: %+v, %v", sess, err)
	}
	if got := mustMessages(t, s, "t1", "s", memory.MessageQuery{}); !slices.Equal(ids(got), []string{"a-000", "a-002"}) {
		t.Fatalf("messages after delete = %v", ids(got))
	}
	if got, _ := s.MessagesByID(bg, "t1", []string{"a-001"}, true); len(got) != 0 {
		t.Fatal("a deleted message is still found by id")
	}
	_, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error { return tx.Delete("a-001") })
	wantCode(t, "deleting a deleted message", err, memory.ENOTFOUND)
	// A new message after a delete does not reuse the seq.
	sess = mustAppend(t, s, "t1", "s", Msgs("b", 1))
	if sess.LastSeq != 4 {
		t.Fatalf("last seq after delete and append = %d, want 4", sess.LastSeq)
	}
	checkCounters(t, s, "t1", "s")
}

func testIdempotencyKeys(t *testing.T, s memory.Store) {
	at := time.Unix(10_000, 0).UTC()
	rec := func(key string, at time.Time) *memory.WriteRecord {
		return &memory.WriteRecord{Key: key, Hash: "h-" + key, IDs: []string{"a-000"}, Tokens: []int{10}, At: at}
	}
	_, err := s.Write(bg, "t1", "s", NewSession("t1", "s"), func(tx memory.SessionTx) error {
		if r, err := tx.WriteKey("k1"); err != nil || r != nil {
			t.Errorf("a new session's key k1 = %v, %v", r, err)
		}
		if err := tx.Append(Msgs("a", 1)[0]); err != nil {
			return err
		}
		return tx.PutWriteKey(rec("k1", at), at.Add(-memory.WriteKeyTTL), 3)
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.WriteKey(bg, "t1", "s", "k1")
	if err != nil || got == nil || got.Hash != "h-k1" || !slices.Equal(got.IDs, []string{"a-000"}) || !got.At.Equal(at) {
		t.Fatalf("WriteKey k1 = %+v, %v", got, err)
	}
	if r, _ := s.WriteKey(bg, "t2", "s", "k1"); r != nil {
		t.Fatal("a key is visible to another tenant")
	}
	// A failed write keeps no key.
	_, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		if err := tx.PutWriteKey(rec("lost", at), at.Add(-memory.WriteKeyTTL), 3); err != nil {
			return err
		}
		return errRefused
	})
	if !isRefused(err) {
		t.Fatal(err)
	}
	if r, _ := s.WriteKey(bg, "t1", "s", "lost"); r != nil {
		t.Fatal("a rolled-back write kept its idempotency key")
	}
	// Pruning: at most keep records, none older than expireBefore.
	for i, k := range []string{"k2", "k3", "k4"} {
		_, err := s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
			return tx.PutWriteKey(rec(k, at.Add(time.Duration(i+1)*time.Minute)), at.Add(-memory.WriteKeyTTL), 3)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for k, want := range map[string]bool{"k1": false, "k2": true, "k3": true, "k4": true} {
		if r, _ := s.WriteKey(bg, "t1", "s", k); (r != nil) != want {
			t.Errorf("key %s kept = %v, want %v (keep 3, newest first)", k, r != nil, want)
		}
	}
	_, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		return tx.PutWriteKey(rec("k5", at.Add(time.Hour)), at.Add(150*time.Second), 3)
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]bool{"k2": false, "k3": false, "k4": true, "k5": true} {
		if r, _ := s.WriteKey(bg, "t1", "s", k); (r != nil) != want {
			t.Errorf("key %s kept = %v, want %v (expired before +150s)", k, r != nil, want)
		}
	}
	// Deleting the session forgets its keys: a new session of the same id
	// starts clean.
	if err := s.DeleteSession(bg, "t1", "s"); err != nil {
		t.Fatal(err)
	}
	if r, _ := s.WriteKey(bg, "t1", "s", "k5"); r != nil {
		t.Fatal("a deleted session's key survives")
	}
}

func testClientIDs(t *testing.T, s memory.Store) {
	msgs := Msgs("a", 3)
	msgs[0].ClientID, msgs[1].ClientID = "turn-1", "turn-2"
	mustAppend(t, s, "t1", "s", msgs)
	mustAppend(t, s, "t2", "s", []*memory.Message{{ID: "x", Role: memory.RoleUser, Content: "x", Tokens: 1, State: memory.StateActive, ClientID: "turn-1"}})
	got, err := s.MessagesByClientID(bg, "t1", "s", []string{"turn-1", "turn-2", "turn-9"})
	if err != nil || len(got) != 2 || got["turn-1"].ID != "a-000" || got["turn-2"].ID != "a-001" {
		t.Fatalf("MessagesByClientID = %v, %v", got, err)
	}
	_, err = s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		m, err := tx.MessageByClientID("turn-2")
		if err != nil || m == nil || m.ID != "a-001" {
			t.Errorf("tx.MessageByClientID = %v, %v", m, err)
		}
		if m, _ := tx.MessageByClientID("turn-9"); m != nil {
			t.Errorf("an unknown client id found %s", m.ID)
		}
		m.ClientID = "turn-2b" // an edit that renames it frees the old one
		if err := tx.Put(m); err != nil {
			return err
		}
		return tx.Delete("a-000") // a deleted message's client id is free again
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err = s.MessagesByClientID(bg, "t1", "s", []string{"turn-1", "turn-2", "turn-2b"})
	if err != nil || len(got) != 1 || got["turn-2b"] == nil {
		t.Fatalf("client ids after rename and delete = %v, %v", got, err)
	}
	if other, _ := s.MessagesByClientID(bg, "t2", "s", []string{"turn-1"}); other["turn-1"] == nil || other["turn-1"].ID != "x" {
		t.Fatalf("the other tenant's client id = %v", other)
	}
}

// testConcurrentAppends writes one session from many goroutines: the store
// serializes them, so the seqs are 1..n and the counters exact.
func testConcurrentAppends(t *testing.T, s memory.Store) {
	const writers, each = 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				m := Msgs("w", 1)[0]
				m.ID = "w" + string(rune('a'+w)) + "-" + string(rune('a'+i))
				if _, err := s.Append(bg, "t1", "c", NewSession("t1", "c"), []*memory.Message{m}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := mustMessages(t, s, "t1", "c", memory.MessageQuery{})
	if len(got) != writers*each {
		t.Fatalf("%d messages, want %d", len(got), writers*each)
	}
	for i, m := range got {
		if m.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d: seqs must be 1..n", i, m.Seq)
		}
	}
	if sess := mustSession(t, s, "t1", "c"); sess.LastSeq != writers*each || sess.Tokens != 10*writers*each {
		t.Fatalf("session after concurrent appends: last seq %d tokens %d", sess.LastSeq, sess.Tokens)
	}
	checkCounters(t, s, "t1", "c")
}
