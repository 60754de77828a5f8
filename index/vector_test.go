package index

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/simd"
	"github.com/ctxd/ctxd/memory"
)

// The vector side across sessions must return exactly the brute-force top n
// (cosine over the stored vectors, after the state and time filters), the
// same with any number of scan workers and with or without the assembly.
// Vectors as the store gives them back (int8 codes times a scale) keep no
// float32 row; others keep theirs.
func TestCrossSessionVectorScanIsExact(t *testing.T) {
	t.Run("float32", func(t *testing.T) { testVectorScanIsExact(t, func(v []float32) []float32 { return v }, 0) })
	t.Run("int8", func(t *testing.T) { testVectorScanIsExact(t, storeRoundTrip, 0.003) })
}

func testVectorScanIsExact(t *testing.T, stored func([]float32) []float32, apart float32) {
	const dim, n = 100, 50
	x := openTest(t, Options{})
	msgs := newCorpus(11).messages("t", 3000, 30, dim, t0)
	for _, m := range msgs[:5] {
		m.SessionID = "lonely-" + m.ID // one-row sessions beside big ones
	}
	// Near-ties: a cluster of rows around query 0, closer together than
	// the quantisation error, which the int8 pass cannot order.
	for i, m := range msgs[100:400] {
		v := slices.Clone(hashVec("query0", dim))
		v[i%dim] += apart + 0.0002*float32(i+1) // distinct: no exact ties
		m.Vector = v
	}
	for _, m := range msgs {
		m.Vector = stored(m.Vector)
	}
	// The oracle of int8 rows is the same rows kept as float32 (what the
	// index held before it kept codes): the same float32 arithmetic, where
	// the float64 brute force can order a near-tie otherwise.
	want := func(q *memory.SearchQuery) []string { return bruteForce(msgs, q, n) }
	if apart > 0 {
		ref := openTest(t, Options{})
		int8Rows = false
		mustApply(t, ref, memory.IndexBatch{Upserts: msgs, Watermark: 1})
		int8Rows = true
		want = func(q *memory.SearchQuery) []string { return refSearch(t, ref, q, n) }
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	checkVectorScan(t, x, msgs, want, dim, n)
	floats := 0
	for _, c := range x.vec.byTenant["t"] {
		floats += len(c.floats)
	}
	if isInt8 := apart > 0; isInt8 != (floats == 0) {
		t.Fatalf("%d rows of %d keep a float32 row (int8 vectors: %v)", floats, len(msgs), isInt8)
	}

	// Rows move when others are deleted, and change when re-embedded: the
	// int8 copies must follow.
	deletes := msgs[200:800]
	kept := slices.Clone(msgs[:200])
	kept = append(kept, msgs[800:]...)
	for i, m := range kept[1000:1300] {
		m.Vector = stored(hashVec(fmt.Sprint("again", i), dim))
	}
	mustApply(t, x, memory.IndexBatch{Deletes: deletes, Upserts: kept[1000:1300], Watermark: 2})
	if apart == 0 {
		want = func(q *memory.SearchQuery) []string { return bruteForce(kept, q, n) }
	} else {
		ref := openTest(t, Options{})
		int8Rows = false
		mustApply(t, ref, memory.IndexBatch{Upserts: kept, Watermark: 1})
		int8Rows = true
		want = func(q *memory.SearchQuery) []string { return refSearch(t, ref, q, n) }
	}
	checkVectorScan(t, x, kept, want, dim, n)
}

// refSearch is ref's vector search in Go, one worker.
func refSearch(t *testing.T, ref *Index, q *memory.SearchQuery, n int) []string {
	t.Helper()
	defer func(was bool) { simd.Enabled = was }(simd.Enabled)
	simd.Enabled = false
	got, err := ref.vec.search(context.Background(), q, n, 1)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(got))
	for i, c := range got {
		ids[i] = c.id
	}
	return ids
}

func checkVectorScan(t *testing.T, x *Index, msgs []*memory.Message, wantOf func(*memory.SearchQuery) []string, dim, n int) {
	t.Helper()
	since := t0.Add(1000 * time.Minute)
	filters := map[string]func(q *memory.SearchQuery){
		"none": func(*memory.SearchQuery) {},
		"states+since": func(q *memory.SearchQuery) {
			q.States = []memory.State{memory.StateActive, memory.StateRecovered}
			q.Since = since
		},
	}
	for name, filter := range filters {
		for i := range 5 {
			q := memory.SearchQuery{Tenant: "t", Vector: hashVec(fmt.Sprint("query", i), dim), Mode: memory.ModeVector, K: n}
			filter(&q)
			want := wantOf(&q)
			for _, useSIMD := range []bool{false, true} {
				for _, parallel := range []int{1, 2, 4} {
					if useSIMD && !simd.Enabled {
						continue
					}
					t.Run(fmt.Sprintf("%s/q%d/simd=%v/p%d", name, i, useSIMD, parallel), func(t *testing.T) {
						defer func(was bool) { simd.Enabled = was }(simd.Enabled)
						simd.Enabled = useSIMD
						got, err := x.vec.search(context.Background(), &q, n, parallel)
						if err != nil {
							t.Fatal(err)
						}
						gotIDs := make([]string, len(got))
						for j, c := range got {
							gotIDs[j] = c.id
							if want := msgSession(msgs, c.id); c.session != want {
								t.Fatalf("%s: session %s, want %s", c.id, c.session, want)
							}
						}
						if !slices.Equal(gotIDs, want) {
							t.Fatalf("top %d:\n got %v\nwant %v", n, gotIDs, want)
						}
					})
				}
			}
		}
	}
}

// storeRoundTrip is v as boltstore keeps and decodes it: int8 codes with
// scale max|v|/127.
func storeRoundTrip(v []float32) []float32 {
	var mx float64
	for _, f := range v {
		mx = max(mx, math.Abs(float64(f)))
	}
	scale := float32(mx / 127)
	out := make([]float32, len(v))
	for i, f := range v {
		var c float64
		if scale > 0 {
			c = math.Round(float64(f) / float64(scale))
		}
		out[i] = float32(int8(max(-127, min(127, c)))) * scale
	}
	return out
}

func msgSession(msgs []*memory.Message, id string) string {
	for _, m := range msgs {
		if m.ID == id {
			return m.SessionID
		}
	}
	return ""
}

// bruteForce ranks msgs by cosine to q's vector in float64, after q's
// filters, and returns the ids of the best n.
func bruteForce(msgs []*memory.Message, q *memory.SearchQuery, n int) []string {
	type scored struct {
		id string
		s  float64
	}
	var all []scored
	f := newVectorFilter(q)
	for _, m := range msgs {
		if f != nil && !f.keep(m.ID, m.State, unixNano(m.CreatedAt), m.IsSummary()) {
			continue
		}
		var dot, nq, nm float64
		for i := range m.Vector {
			dot += float64(q.Vector[i]) * float64(m.Vector[i])
			nq += float64(q.Vector[i]) * float64(q.Vector[i])
			nm += float64(m.Vector[i]) * float64(m.Vector[i])
		}
		all = append(all, scored{m.ID, dot / math.Sqrt(nq*nm)})
	}
	slices.SortFunc(all, func(a, b scored) int {
		if a.s != b.s {
			return cmp.Compare(b.s, a.s)
		}
		return strings.Compare(a.id, b.id)
	})
	ids := make([]string, 0, n)
	for _, s := range all[:min(n, len(all))] {
		ids = append(ids, s.id)
	}
	return ids
}

// A search in one session without a filter scores as chromem-go did, which
// answered those before: the float32 products added in order, to the bit.
func TestOneSessionScoresAddInOrder(t *testing.T) {
	const dim = 100
	x := openTest(t, Options{})
	msgs := newCorpus(5).messages("t", 200, 1, dim, t0)
	for _, m := range msgs {
		m.Vector = storeRoundTrip(m.Vector)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	q := memory.SearchQuery{Tenant: "t", Sessions: []string{msgs[0].SessionID}, Vector: hashVec("q", dim), Mode: memory.ModeVector, K: 20}
	got, err := x.vec.search(context.Background(), &q, 20, 1)
	if err != nil {
		t.Fatal(err)
	}
	qv := slices.Clone(q.Vector)
	normalize(qv)
	byID := map[string]*memory.Message{}
	for _, m := range msgs {
		byID[m.ID] = m
	}
	for _, c := range got {
		row := slices.Clone(byID[c.id].Vector)
		normalize(row)
		var want float32
		for i := range qv {
			want += qv[i] * row[i]
		}
		if c.score != float64(want) {
			t.Fatalf("%s: score %v, want %v (added in order)", c.id, c.score, want)
		}
	}
}
