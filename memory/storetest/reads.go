package storetest

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

// testChangeFeed checks what the indexer relies on: every write logs one
// change per message it touched, numbered without gaps in commit order,
// and LastSeq names the newest even after a trim.
func testChangeFeed(t *testing.T, s memory.Store) {
	if last, err := s.LastSeq(bg); err != nil || last != 0 {
		t.Fatalf("an empty store's LastSeq = %d, %v", last, err)
	}
	mustAppend(t, s, "t1", "s", Msgs("a", 3))
	mustAppend(t, s, "t2", "s", Msgs("b", 2))
	_, err := s.Update(bg, "t1", "s", func(tx memory.SessionTx) error {
		m, err := tx.Message("a-001")
		if err != nil {
			return err
		}
		m.State = memory.StateDropped
		return tx.Put(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.Changes(bg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, c := range all {
		if c.Seq != uint64(i+1) {
			t.Fatalf("change %d has seq %d: the feed must have no gaps (the indexer takes a gap for a trimmed log)", i, c.Seq)
		}
		got = append(got, c.Tenant+"/"+c.SessionID+"/"+c.MessageID+"/"+string(c.Op))
	}
	want := []string{"t1/s/a-000/upsert", "t1/s/a-001/upsert", "t1/s/a-002/upsert", "t2/s/b-000/upsert", "t2/s/b-001/upsert", "t1/s/a-001/upsert"}
	if !slices.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
	if last, _ := s.LastSeq(bg); last != 6 {
		t.Fatalf("LastSeq = %d, want 6", last)
	}
	page, err := s.Changes(bg, 2, 3)
	if err != nil || len(page) != 3 || page[0].Seq != 3 || page[2].Seq != 5 {
		t.Fatalf("Changes(after 2, limit 3) = %+v, %v", page, err)
	}
	if err := s.TrimChanges(bg, 4); err != nil {
		t.Fatal(err)
	}
	// A store may keep trimmed entries (several nodes follow one log), but
	// what follows the trim point stays, and LastSeq does not go back.
	rest, err := s.Changes(bg, 4, 0)
	if err != nil || len(rest) != 2 || rest[0].Seq != 5 {
		t.Fatalf("changes after a trim to 4 = %+v, %v", rest, err)
	}
	if last, _ := s.LastSeq(bg); last != 6 {
		t.Fatalf("LastSeq after a trim = %d, want 6", last)
	}
	mustAppend(t, s, "t1", "s", Msgs("c", 1))
	if last, _ := s.LastSeq(bg); last != 7 {
		t.Fatalf("LastSeq after a trim and a write = %d, want 7", last)
	}
}

func testChangeFeedDeletes(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t1", "s", Msgs("a", 2))
	mustAppend(t, s, "t1", "gone", Msgs("g", 2))
	before, _ := s.LastSeq(bg)
	if _, err := s.Update(bg, "t1", "s", func(tx memory.SessionTx) error { return tx.Delete("a-000") }); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteSession(bg, "t1", "gone"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Changes(bg, before, 0)
	if err != nil || len(got) != 2 {
		t.Fatalf("changes of two deletes = %+v, %v", got, err)
	}
	if got[0].Op != memory.ChangeDelete || got[0].MessageID != "a-000" || got[0].SessionID != "s" {
		t.Errorf("message delete logged as %+v", got[0])
	}
	if got[1].Op != memory.ChangeDeleteSession || got[1].SessionID != "gone" || got[1].Tenant != "t1" {
		t.Errorf("session delete logged as %+v", got[1])
	}
	if m, _ := s.MessagesByID(bg, "t1", []string{"g-000", "g-001"}, false); len(m) != 0 {
		t.Errorf("a deleted session's messages are still found: %v", ids(m))
	}
	// The same session id starts over.
	sess := mustAppend(t, s, "t1", "gone", Msgs("h", 1))
	if sess.LastSeq != 1 || sess.Tokens != 10 {
		t.Fatalf("a re-created session starts at %+v", sess)
	}
}

func testTenantIsolation(t *testing.T, s memory.Store) {
	mustAppend(t, s, "acme", "s", Msgs("a", 2))
	mustAppend(t, s, "zeta", "s", Msgs("z", 3))
	mustAppend(t, s, "zeta", "other", Msgs("o", 1))
	if a, z := mustSession(t, s, "acme", "s"), mustSession(t, s, "zeta", "s"); a.Tokens != 20 || z.Tokens != 30 || a.Tenant != "acme" {
		t.Fatalf("one session id in two tenants: %+v / %+v", a, z)
	}
	if got, _ := s.MessagesByID(bg, "acme", []string{"z-000", "a-000"}, false); !slices.Equal(ids(got), []string{"a-000"}) {
		t.Fatalf("MessagesByID across tenants = %v", ids(got))
	}
	if _, err := s.Session(bg, "acme", "other"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("another tenant's session: %v", err)
	}
	if _, err := s.Messages(bg, "acme", "other", memory.MessageQuery{}); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("another tenant's messages: %v", err)
	}
	_, err := s.Update(bg, "acme", "s", func(tx memory.SessionTx) error {
		_, err := tx.Message("z-000")
		return err
	})
	wantCode(t, "tx.Message of another tenant's message", err, memory.ENOTFOUND)
	list, err := s.Sessions(bg, "zeta", "", 0)
	if err != nil || len(list) != 2 || list[0].ID != "other" || list[1].ID != "s" {
		t.Fatalf("zeta's sessions = %v, %v", list, err)
	}
	tenants, err := s.Tenants(bg)
	if err != nil || !slices.Equal(tenants, []string{"acme", "zeta"}) {
		t.Fatalf("Tenants = %v, %v", tenants, err)
	}
	if err := s.DeleteSession(bg, "acme", "s"); err != nil {
		t.Fatal(err)
	}
	if z := mustMessages(t, s, "zeta", "s", memory.MessageQuery{}); len(z) != 3 {
		t.Fatalf("deleting acme/s left zeta/s with %d messages", len(z))
	}
	if tenants, _ := s.Tenants(bg); !slices.Equal(tenants, []string{"zeta"}) {
		t.Fatalf("Tenants after acme's last session went = %v", tenants)
	}
}

// testSessionsOrder pages sessions in byte order of their ids (not a
// locale's collation: "B" before "a", "a-b" before "a.b").
func testSessionsOrder(t *testing.T, s memory.Store) {
	for _, id := range []string{"a.b", "B", "a", "a-b", "a_b", "b"} {
		if _, err := s.UpdateSession(bg, "t", id, NewSession("t", id), func(*memory.Session) error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	after := ""
	for {
		page, err := s.Sessions(bg, "t", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		for _, p := range page {
			got = append(got, p.ID)
		}
		after = page[len(page)-1].ID
	}
	if want := []string{"B", "a", "a-b", "a.b", "a_b", "b"}; !slices.Equal(got, want) {
		t.Fatalf("sessions paged = %v, want %v", got, want)
	}
}

func testMessageQuery(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t", "s", Msgs("a", 6))
	_, err := s.Update(bg, "t", "s", func(tx memory.SessionTx) error {
		for _, id := range []string{"a-001", "a-004"} {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			m.State = memory.StateDropped
			if err := tx.Put(m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		q    memory.MessageQuery
		want []string
	}{
		{memory.MessageQuery{AfterSeq: 3}, []string{"a-003", "a-004", "a-005"}},
		{memory.MessageQuery{Limit: 2}, []string{"a-000", "a-001"}},
		{memory.MessageQuery{States: []memory.State{memory.StateDropped}}, []string{"a-001", "a-004"}},
		{memory.MessageQuery{States: []memory.State{memory.StateActive}, AfterSeq: 1, Limit: 2}, []string{"a-002", "a-003"}},
		{memory.MessageQuery{States: []memory.State{memory.StateDropped, memory.StateActive}, AfterSeq: 4}, []string{"a-004", "a-005"}},
		// newest first, paged by BeforeSeq
		{memory.MessageQuery{Desc: true}, []string{"a-005", "a-004", "a-003", "a-002", "a-001", "a-000"}},
		{memory.MessageQuery{Desc: true, Limit: 2}, []string{"a-005", "a-004"}},
		{memory.MessageQuery{Desc: true, BeforeSeq: 5, Limit: 2}, []string{"a-003", "a-002"}},
		{memory.MessageQuery{Desc: true, BeforeSeq: 5, AfterSeq: 2}, []string{"a-003", "a-002"}},
		{memory.MessageQuery{Desc: true, States: []memory.State{memory.StateDropped}}, []string{"a-004", "a-001"}},
		{memory.MessageQuery{Desc: true, States: []memory.State{memory.StateDropped, memory.StateActive}, BeforeSeq: 5, Limit: 2}, []string{"a-003", "a-002"}},
	}
	for _, c := range cases {
		if got := mustMessages(t, s, "t", "s", c.q); !slices.Equal(ids(got), c.want) {
			t.Errorf("Messages(%+v) = %v, want %v", c.q, ids(got), c.want)
		}
	}
	withVec := mustMessages(t, s, "t", "s", memory.MessageQuery{Vectors: true, Limit: 1})
	if len(withVec) != 1 || !sameVector(withVec[0].Vector, []float32{1, 1}) {
		t.Fatalf("Messages with vectors = %+v", withVec)
	}
	_, err = s.Messages(bg, "t", "missing", memory.MessageQuery{})
	wantCode(t, "Messages of a missing session", err, memory.ENOTFOUND)
}

// exported is a session as an export writes it: messages with every field.
func exported(tenant, id string) (*memory.Session, []*memory.Message) {
	sess := NewSession(tenant, id)()
	sess.Compactions, sess.AssistantTurns, sess.Tokens, sess.Counts = 2, 1, 999, memory.Counts{Active: 99}
	at := time.Unix(7000, 0).UTC()
	msgs := Msgs("imp-"+id, 4)
	for i, m := range msgs {
		m.Tenant, m.SessionID, m.Seq = tenant, id, uint64(10*(i+1))
	}
	msgs[1].State = memory.StateDropped
	msgs[1].Cold = &memory.ColdInfo{DropReason: memory.ReasonLowRelevance, RelevanceScore: 0.25, DroppedAt: at, RecoverableUntil: at.Add(48 * time.Hour)}
	msgs[2].Kind, msgs[2].Sources, msgs[2].Anchor, msgs[2].Role = memory.KindSummary, []string{msgs[1].ID}, 20, memory.RoleAssistant
	msgs[3].Metadata, msgs[3].ClientID, msgs[3].Important = map[string]any{"k": "v"}, "client-3", true
	return sess, msgs
}

func testImport(t *testing.T, s memory.Store) {
	sess, msgs := exported("t", "imp")
	before, _ := s.LastSeq(bg)
	got, err := s.Import(bg, sess, msgs)
	if err != nil {
		t.Fatal(err)
	}
	if got.Counts != (memory.Counts{Active: 3, Dropped: 1}) || got.Tokens != 30 || got.Summaries != 1 || got.LastSeq != 40 || got.Compactions != 2 {
		t.Fatalf("imported session counters are not its messages': %+v", got)
	}
	stored := mustMessages(t, s, "t", "imp", memory.MessageQuery{Vectors: true})
	for i, m := range stored {
		a, _ := json.Marshal(m)
		b, _ := json.Marshal(msgs[i])
		if string(a) != string(b) || !sameVector(m.Vector, msgs[i].Vector) {
			t.Errorf("message %d imported as\n%s\nwant\n%s", i, a, b)
		}
	}
	if c, _ := s.MessagesByClientID(bg, "t", "imp", []string{"client-3"}); c["client-3"] == nil {
		t.Error("an imported message's client id is not found")
	}
	if changes, _ := s.Changes(bg, before, 0); len(changes) != 4 {
		t.Errorf("an import of 4 messages logged %d changes, want 4 upserts", len(changes))
	}
	// The next message continues after the imported seqs.
	if next := mustAppend(t, s, "t", "imp", Msgs("n", 1)); next.LastSeq != 41 {
		t.Fatalf("append after import: last seq %d, want 41", next.LastSeq)
	}
	checkCounters(t, s, "t", "imp")
}

func testImportRefuses(t *testing.T, s memory.Store) {
	sess, msgs := exported("t", "imp")
	if _, err := s.Import(bg, sess, msgs); err != nil {
		t.Fatal(err)
	}
	_, err := s.Import(bg, sess, msgs)
	wantCode(t, "importing an existing session", err, memory.ECONFLICT)
	other, otherMsgs := exported("t", "other")
	otherMsgs[0].ID = msgs[0].ID // an id the store has
	_, err = s.Import(bg, other, otherMsgs)
	wantCode(t, "importing a message id the store has", err, memory.ECONFLICT)
	if _, err := s.Session(bg, "t", "other"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("a refused import left its session: %v", err)
	}
	third, thirdMsgs := exported("t", "third")
	thirdMsgs[1].Seq = thirdMsgs[0].Seq
	_, err = s.Import(bg, third, thirdMsgs)
	wantCode(t, "importing repeated seqs", err, memory.EINVALID)
	thirdMsgs[1].Seq, thirdMsgs[1].SessionID = 99, "elsewhere"
	_, err = s.Import(bg, third, thirdMsgs)
	wantCode(t, "importing another session's message", err, memory.EINVALID)
}

func testSnapshot(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t1", "a", Msgs("a", 2))
	mustAppend(t, s, "t2", "b", Msgs("b", 1))
	if err := s.SetMeta(bg, "model", "m1"); err != nil {
		t.Fatal(err)
	}
	err := s.View(bg, func(v memory.Snapshot) error {
		// Writes committed while the snapshot is open are not in it.
		mustAppend(t, s, "t1", "a", Msgs("late", 1))
		sess, err := v.Session("t1", "a")
		if err != nil || sess.LastSeq != 2 {
			t.Errorf("snapshot session = %+v, %v; want last seq 2", sess, err)
		}
		msgs, err := v.Messages("t1", "a", memory.MessageQuery{})
		if err != nil || len(msgs) != 2 {
			t.Errorf("snapshot messages = %v, %v; want the 2 from before", ids(msgs), err)
		}
		var seen []string
		if err := v.ForEachSession("", func(s *memory.Session) error { seen = append(seen, s.Tenant+"/"+s.ID); return nil }); err != nil {
			return err
		}
		if !slices.Equal(seen, []string{"t1/a", "t2/b"}) {
			t.Errorf("snapshot sessions = %v", seen)
		}
		seen = nil
		if err := v.ForEachSession("t2", func(s *memory.Session) error { seen = append(seen, s.ID); return nil }); err != nil {
			return err
		}
		if !slices.Equal(seen, []string{"b"}) {
			t.Errorf("snapshot sessions of t2 = %v", seen)
		}
		if m, err := v.Meta("model"); err != nil || m != "m1" {
			t.Errorf("snapshot meta = %q, %v", m, err)
		}
		_, err = v.Session("t1", "missing")
		wantCode(t, "snapshot Session of a missing session", err, memory.ENOTFOUND)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testScans(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t1", "a", Msgs("a", 2))
	sum := Msgs("s", 1)
	sum[0].Kind, sum[0].Role = memory.KindSummary, memory.RoleAssistant
	mustAppend(t, s, "t2", "b", sum)
	mustAppend(t, s, "t2", "b", []*memory.Message{{ID: "novec", Role: memory.RoleUser, Content: "x", Tokens: 1, State: memory.StateActive}})
	var all []string
	if err := s.ForEachMessage(bg, func(m *memory.Message) error { all = append(all, m.ID); return nil }); err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	if !slices.Equal(all, []string{"a-000", "a-001", "novec", "s-000"}) {
		t.Fatalf("ForEachMessage visited %v", all)
	}
	vecs := map[string]*memory.Message{}
	err := s.ForEachVector(bg, func(m *memory.Message) error { vecs[m.ID] = m; return nil }, func(d *memory.DamagedRecord) { t.Errorf("damaged: %v", d) })
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 3 || vecs["novec"] != nil {
		t.Fatalf("ForEachVector visited %d messages (%v), want the 3 with vectors", len(vecs), vecs)
	}
	v := vecs["s-000"]
	if v.Tenant != "t2" || v.SessionID != "b" || v.State != memory.StateActive || v.Role != memory.RoleAssistant || !v.IsSummary() ||
		!v.CreatedAt.Equal(time.Unix(2000, 0)) || !sameVector(v.Vector, []float32{1, 1}) {
		t.Fatalf("ForEachVector's message lacks what the vector index needs: %+v", v)
	}
}

func testReplaceVectors(t *testing.T, s memory.Store) {
	mustAppend(t, s, "t1", "a", Msgs("a", 2))
	before, _ := s.LastSeq(bg)
	if err := s.ReplaceVectors(bg, map[string][]float32{"a-001": {0, 5}, "unknown": {1, 1}}); err != nil {
		t.Fatal(err)
	}
	got, _ := s.MessagesByID(bg, "t1", []string{"a-000", "a-001"}, true)
	if len(got) != 2 || !sameVector(got[1].Vector, []float32{0, 5}) || !sameVector(got[0].Vector, []float32{1, 1}) {
		t.Fatalf("vectors after ReplaceVectors = %v, %v", got[0].Vector, got[1].Vector)
	}
	changes, _ := s.Changes(bg, before, 0)
	if len(changes) != 1 || changes[0].MessageID != "a-001" || changes[0].Op != memory.ChangeUpsert {
		t.Fatalf("ReplaceVectors logged %+v, want one upsert of a-001", changes)
	}
}

func testMeta(t *testing.T, s memory.Store) {
	if v, err := s.Meta(bg, "unset"); err != nil || v != "" {
		t.Fatalf("an unset meta key = %q, %v", v, err)
	}
	for _, v := range []string{"one", "two"} {
		if err := s.SetMeta(bg, "k", v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Meta(bg, "k"); err != nil || got != v {
			t.Fatalf("meta k = %q, %v; want %q", got, err, v)
		}
	}
}

func testCancelled(t *testing.T, s memory.Store) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	_, err := s.Append(ctx, "t", "s", NewSession("t", "s"), Msgs("a", 1))
	if err == nil {
		t.Fatal("Append with a cancelled context stored its messages")
	}
	if _, err := s.Session(bg, "t", "s"); memory.ErrorCode(err) != memory.ENOTFOUND {
		t.Fatalf("a cancelled Append created the session: %v", err)
	}
}

// testDamage damages one message record and checks that the store names it
// (EDAMAGED with its id) rather than serving garbage, that the damage scan
// goes past it, and that deleting its session clears it.
func testDamage(t *testing.T, b Backend) {
	s := b.Open(t)
	mustAppend(t, s, "t", "s", Msgs("a", 3))
	mustAppend(t, s, "t", "ok", Msgs("b", 1))
	b.Damage(t, s, "t", "s", "a-001")
	_, err := s.Messages(bg, "t", "s", memory.MessageQuery{})
	wantCode(t, "Messages over a damaged record", err, memory.EDAMAGED)
	_, err = s.MessagesByID(bg, "t", []string{"a-001"}, false)
	wantCode(t, "MessagesByID of a damaged record", err, memory.EDAMAGED)
	if got := mustMessages(t, s, "t", "ok", memory.MessageQuery{}); len(got) != 1 {
		t.Fatalf("another session reads %d messages", len(got))
	}
	if ds, ok := s.(memory.DamageScanner); ok {
		var read []string
		var damaged []*memory.DamagedRecord
		err := ds.ScanMessages(bg, func(m *memory.Message) error { read = append(read, m.ID); return nil },
			func(d *memory.DamagedRecord) { damaged = append(damaged, d) })
		if err != nil || len(read) != 3 || len(damaged) != 1 || damaged[0].SessionID != "s" {
			t.Fatalf("ScanMessages read %v and reported %v, %v", read, damaged, err)
		}
	}
	if err := s.DeleteSession(bg, "t", "s"); err != nil {
		t.Fatalf("deleting a session with a damaged record: %v", err)
	}
	if err := s.ForEachMessage(bg, func(*memory.Message) error { return nil }); err != nil {
		t.Fatalf("the store still holds damage after its session went: %v", err)
	}
}
