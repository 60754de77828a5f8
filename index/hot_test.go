package index

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// A one-session search without a filter is answered by a chromem-go
// collection while the session is hot, and gives what the scan gives, to
// the bit; writes and deletes reach a hot session; no more sessions stay
// hot than the bound in bytes holds, and a session let go answers the same
// again.
func TestHotSessionsAnswerAsTheScan(t *testing.T) {
	const dim, n, sessions = 100, 10, 6
	x := openTest(t, Options{})
	// Room for two sessions of 100 rows and a write, not three.
	x.vec.hot = newHotSessions(2 * 110 * (dim*4 + hotRowOverhead))
	msgs := newCorpus(7).messages("t", 600, sessions, dim, t0)
	for _, m := range msgs {
		m.Vector = storeRoundTrip(m.Vector)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	var names []string
	for _, m := range msgs {
		if !slices.Contains(names, m.SessionID) {
			names = append(names, m.SessionID)
		}
	}
	search := func(session, seed string) []vectorCandidate {
		t.Helper()
		q := memory.SearchQuery{Tenant: "t", Sessions: []string{session}, Vector: hashVec(seed, dim), Mode: memory.ModeVector, K: n}
		got, err := x.vec.search(context.Background(), &q, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	scan := func(session, seed string) []vectorCandidate {
		t.Helper()
		qv := slices.Clone(hashVec(seed, dim))
		normalize(qv)
		cs, ss := x.vec.collections("t", []string{session})
		h := make(minHeap, 0, n)
		cs[0].scan(qv, nil, nil, ss[0], &h, n, new(scanBuf), true)
		out := slices.Clone([]vectorCandidate(h))
		slices.SortFunc(out, byScoreThenID)
		return out
	}
	for round := range 2 {
		for _, s := range names {
			seed := fmt.Sprintf("q-%s-%d", s, round)
			if got, want := search(s, seed), scan(s, seed); !slices.Equal(got, want) {
				t.Fatalf("session %s: hot answer %v, scan %v", s, got, want)
			}
			if h := x.vec.hot.len(); h > 2 {
				t.Fatalf("%d sessions hot, bound 2", h)
			}
		}
	}
	c := x.vec.get(collKey{"t", names[len(names)-1]}, false)
	c.mu.RLock()
	isHot := c.cc != nil
	c.mu.RUnlock()
	if !isHot {
		t.Fatal("the session searched last is not hot")
	}
	// A write and a delete in a hot session: the new row is found, the
	// deleted one is not.
	s := names[len(names)-1]
	fresh := &memory.Message{ID: "fresh", Tenant: "t", SessionID: s, Role: memory.RoleUser, Content: "x", State: memory.StateActive,
		CreatedAt: t0, Vector: storeRoundTrip(hashVec("target", dim))}
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{fresh}, Watermark: 2})
	if got := search(s, "target"); len(got) == 0 || got[0].id != "fresh" {
		t.Fatalf("a hot session's new row is not found first: %v", got)
	}
	mustApply(t, x, memory.IndexBatch{Deletes: []*memory.Message{{ID: "fresh", Tenant: "t", SessionID: s}}, Watermark: 3})
	got := search(s, "target")
	if slices.ContainsFunc(got, func(c vectorCandidate) bool { return c.id == "fresh" }) {
		t.Fatalf("a deleted row is still answered: %v", got)
	}
	if want := scan(s, "target"); !slices.Equal(got, want) {
		t.Fatalf("after the delete: hot %v, scan %v", got, want)
	}
}

// The hot sessions are bounded by bytes, not by count: a session larger
// than the bound is never made hot (the scan answers it the same), and
// small sessions share the room a large one would take.
func TestHotSessionsBoundedByBytes(t *testing.T) {
	const dim, n = 100, 10
	x := openTest(t, Options{})
	rowBytes := int64(dim*4 + hotRowOverhead)
	bound := 300 * rowBytes
	x.vec.hot = newHotSessions(bound)
	var msgs []*memory.Message
	add := func(session string, rows int) {
		for i := range rows {
			msgs = append(msgs, &memory.Message{ID: fmt.Sprintf("%s-%d", session, i), Tenant: "t", SessionID: session,
				Role: memory.RoleUser, Content: "x", State: memory.StateActive, CreatedAt: t0,
				Vector: storeRoundTrip(hashVec(fmt.Sprintf("%s/%d", session, i), dim))})
		}
	}
	add("big", 400)
	for i := range 6 {
		add(fmt.Sprintf("small%d", i), 50)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	hot := func(session string) bool {
		c := x.vec.get(collKey{"t", session}, false)
		c.mu.RLock()
		defer c.mu.RUnlock()
		return c.cc != nil
	}
	for round := range 2 {
		for _, s := range []string{"big", "small0", "small1", "small2", "small3", "small4", "small5", "big"} {
			seed := fmt.Sprintf("q-%s-%d", s, round)
			q := memory.SearchQuery{Tenant: "t", Sessions: []string{s}, Vector: hashVec(seed, dim), Mode: memory.ModeVector, K: n}
			got, err := x.vec.search(context.Background(), &q, n, 1)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != n {
				t.Fatalf("session %s: %d hits, want %d", s, len(got), n)
			}
			if b := x.vec.hot.bytes(); b > bound {
				t.Fatalf("after searching %s: hot sessions hold %d bytes, bound %d", s, b, bound)
			}
		}
	}
	if hot("big") {
		t.Fatal("a session larger than the bound was made hot")
	}
	if got := x.vec.hot.len(); got != 6 {
		t.Fatalf("%d sessions hot, want the 6 small ones (300 rows fit)", got)
	}
}
