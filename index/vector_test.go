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
func TestCrossSessionVectorScanIsExact(t *testing.T) {
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
		v[i%dim] += 0.0002 * float32(i+1) // distinct: no exact ties
		m.Vector = v
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
	checkVectorScan(t, x, msgs, dim, n)

	// Rows move when others are deleted, and change when re-embedded: the
	// int8 copies must follow.
	deletes := msgs[200:800]
	kept := slices.Clone(msgs[:200])
	kept = append(kept, msgs[800:]...)
	for i, m := range kept[1000:1300] {
		m.Vector = hashVec(fmt.Sprint("again", i), dim)
	}
	mustApply(t, x, memory.IndexBatch{Deletes: deletes, Upserts: kept[1000:1300], Watermark: 2})
	checkVectorScan(t, x, kept, dim, n)
}

func checkVectorScan(t *testing.T, x *Index, msgs []*memory.Message, dim, n int) {
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
			want := bruteForce(msgs, &q, n)
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
