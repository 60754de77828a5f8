package index

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// A load that runs while writes are applied ends with what the writes
// wrote, whatever order the two come in: a message a write changed keeps the
// write's state, one it deleted stays deleted, a session it deleted does not
// come back. Searches during the load wait for it.
func TestVectorLoadGivesWayToWrites(t *testing.T) {
	const dim, n = 100, 30
	// The store when the load read it: 600 messages in 6 sessions.
	snapshot := newCorpus(3).messages("t", 600, 6, dim, t0)
	for _, m := range snapshot {
		m.Vector = storeRoundTrip(m.Vector)
	}
	clone := func(m *memory.Message) *memory.Message { c := *m; return &c }

	// Writes applied while the load runs: a state change and a new
	// vector, deletes, a deleted session, new messages (some in that
	// session, created again).
	changed := clone(snapshot[10])
	changed.State = memory.StateDropped
	reembedded := clone(snapshot[11])
	reembedded.Vector = storeRoundTrip(hashVec("new", dim))
	deleted := []*memory.Message{snapshot[12], snapshot[13]}
	gone := memory.SessionRef{Tenant: "t", ID: snapshot[20].SessionID}
	fresh := newCorpus(4).messages("t", 50, 6, dim, t0)
	for i, m := range fresh {
		m.ID = fmt.Sprintf("fresh%03d", i)
		m.Vector = storeRoundTrip(m.Vector)
	}

	// What the index must hold at the end: the store after the writes.
	var want []*memory.Message
	for _, m := range snapshot {
		switch {
		case m.SessionID == gone.ID || m.ID == deleted[0].ID || m.ID == deleted[1].ID:
		case m.ID == changed.ID:
			want = append(want, changed)
		case m.ID == reembedded.ID:
			want = append(want, reembedded)
		default:
			want = append(want, m)
		}
	}
	want = append(want, fresh...)
	ref := openTest(t, Options{})
	mustApply(t, ref, memory.IndexBatch{Upserts: want, Watermark: 1})

	x := openTest(t, Options{})
	x.BeginVectorLoad()
	mustLoad := func(msgs []*memory.Message) {
		t.Helper()
		if err := x.LoadVectors(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
	}
	q := memory.SearchQuery{Tenant: "t", Vector: hashVec("new", dim), Mode: memory.ModeVector, K: n}
	early := make(chan []string, 1)
	go func() { // asked before anything loaded: answered once all is
		hits, err := x.Search(context.Background(), q)
		if err != nil {
			t.Error(err)
		}
		early <- ids(hits)
	}()
	mustLoad(snapshot[:300]) // the load has read half the store
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{changed, reembedded}, Deletes: deleted, Watermark: 2})
	mustApply(t, x, memory.IndexBatch{DeleteSessions: []memory.SessionRef{gone}, Watermark: 3})
	mustApply(t, x, memory.IndexBatch{Upserts: fresh, Watermark: 4}) // some in the session deleted: it starts anew
	// And the rest, read before the writes.
	mustLoad(snapshot[300:])
	x.EndVectorLoad(nil)
	if got, want := <-early, ids(mustSearch(t, ref, q)); !slices.Equal(got, want) {
		t.Fatalf("search asked during the load:\n got %v\nwant %v", got, want)
	}

	if gotText, gotVec, _ := x.Count(); gotVec != uint64(len(want)) {
		t.Fatalf("vector side holds %d rows (text %d), want %d", gotVec, gotText, len(want))
	}
	for _, f := range []func(*memory.SearchQuery){
		func(*memory.SearchQuery) {},
		func(q *memory.SearchQuery) { q.States = []memory.State{memory.StateDropped} },
		func(q *memory.SearchQuery) { q.Sessions = []string{gone.ID} },
	} {
		q := q
		f(&q)
		got, want := ids(mustSearch(t, x, q)), ids(mustSearch(t, ref, q))
		if !slices.Equal(got, want) {
			t.Fatalf("after the load, %+v:\n got %v\nwant %v", q.States, got, want)
		}
	}
}

// A load that failed fails the searches that need vectors (the vector
// side is incomplete), and only those.
func TestVectorLoadFailed(t *testing.T) {
	x := openTest(t, Options{})
	x.BeginVectorLoad()
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("t", "s", "a", "deploy the billing service", 1)}, Watermark: 1})
	x.EndVectorLoad(errors.New("disk on fire"))
	q := memory.SearchQuery{Tenant: "t", Text: "billing", Vector: topicVec(1), Mode: memory.ModeHybrid, K: 5}
	if _, err := x.Search(context.Background(), q); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("hybrid search after a failed load: err %v, want EUNAVAILABLE", err)
	}
	q.Mode = memory.ModeText
	if got := ids(mustSearch(t, x, q)); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("text search after a failed load: %v", got)
	}
}
