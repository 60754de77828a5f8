package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/ctxd/ctxd/internal/simd"
	"github.com/ctxd/ctxd/memory"
)

// The approximate score is within its bound of the exact one, for random
// and for spiky vectors (one large component makes a coarse scale).
func TestQuantBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, dim := range []int{3, 16, 100, 384} {
		spiky := func(seed string) []float32 {
			v := hashVec(seed, dim)
			v[r.IntN(dim)] = 5
			normalize(v)
			return v
		}
		for i := range 300 {
			q, row := hashVec(fmt.Sprint("q", dim, i), dim), hashVec(fmt.Sprint("r", dim, i), dim)
			switch i % 3 {
			case 1:
				row = spiky(fmt.Sprint("s", dim, i))
			case 2:
				q, row = spiky(fmt.Sprint("t", dim, i)), q // near-identical direction half the time
			}
			codes := make([]int8, dim)
			scale, l1 := quantizeRow(row, codes)
			qq := quantizeQuery(q)
			var acc int32
			for j := range dim {
				acc += int32(codes[j]) * int32(qq.codes[j])
			}
			approx, bound := qq.approx(acc, scale, l1, false)
			var exact float64
			for j := range dim {
				exact += float64(q[j]) * float64(row[j])
			}
			if math.Abs(exact-approx) > bound-quantSlack {
				t.Fatalf("dim %d case %d: exact %v, approx %v, bound %v", dim, i, exact, approx, bound)
			}
		}
	}
}

func TestQuantizeZero(t *testing.T) {
	codes := []int8{1, 2, 3}
	if s, l1 := quantizeRow([]float32{0, 0, 0}, codes); s != 0 || l1 != 0 || codes[0] != 0 || codes[2] != 0 {
		t.Fatalf("scale %v l1 %v codes %v", s, l1, codes)
	}
	qq := quantizeQuery([]float32{0, 0})
	if score, bound := qq.approx(0, 0.5, 1, false); score != 0 || bound != quantSlack {
		t.Fatalf("zero query: score %v bound %v", score, bound)
	}
}

// A row kept as the store's int8 codes times a scale has no quantisation
// error of its own: its approximate score is within the query's share of
// the bound (exactCodes) of the score the scan computes exactly.
func TestQuantBoundExactCodes(t *testing.T) {
	for _, dim := range []int{3, 16, 100, 384, 1536} {
		c := &collection{dim: dim, row: map[string]int{}}
		for i := range 300 {
			vec := storeRoundTrip(hashVec(fmt.Sprint("r", dim, i), dim))
			if i%3 == 1 {
				vec[i%dim] *= 40 // spiky: a coarse scale
				vec = storeRoundTrip(vec)
			}
			c.put(&memory.Message{ID: fmt.Sprint(i)}, vec)
			if c.src[i] < 0 {
				t.Fatalf("dim %d row %d: the store's vector kept as float32", dim, i)
			}
			q := hashVec(fmt.Sprint("q", dim, i), dim)
			qq := quantizeQuery(q)
			var acc int32
			for j := range dim {
				acc += int32(c.codes[i*dim+j]) * int32(qq.codes[j])
			}
			approx, bound := qq.approx(acc, c.scales[i], c.l1s[i], true)
			for _, inOrder := range []bool{true, false} { // as the scan adds, in Go or in assembly
				var exact [1]float32
				c.dot(q, c.exact(i, make([]float32, dim)), exact[:], inOrder)
				if d := math.Abs(float64(exact[0]) - approx); d > bound {
					t.Fatalf("dim %d row %d: exact %v, approx %v, off by %v, bound %v", dim, i, exact[0], approx, d, bound)
				}
			}
		}
	}
}

// A search in one session rescores exactly only the rows that may enter
// its top n: with rows alike (sentence vectors share a direction, so their
// scores are close together), the row's own error term, which the store's
// int8 rows do not have, let 2,843 of these 10,000 rows through to the
// exact score (751 without it). The count may grow with the session only
// as the rows a top n replaces on the way do (~n ln(N/n)).
func TestSessionScanRescoresFew(t *testing.T) {
	if !simd.Enabled {
		t.Skip("the int8 pass runs in assembly only")
	}
	const dim, n = 100, 143
	for _, rows := range []int{1_000, 10_000} {
		c := &collection{dim: dim, row: map[string]int{}}
		for i := range rows {
			c.put(&memory.Message{ID: fmt.Sprintf("m%05d", i), State: memory.StateDropped}, storeRoundTrip(alikeVec(fmt.Sprint("row", i), dim)))
		}
		q := alikeVec("q", dim)
		f := newVectorFilter(&memory.SearchQuery{NoSummaries: true})
		var h minHeap
		buf := new(scanBuf)
		c.scan(q, quantizeQuery(q), f, "s", &h, n, buf, false)
		limit := int(3 * n * (1 + math.Log(float64(rows)/n)))
		t.Logf("%d rows: %d rescored (limit %d)", rows, buf.rescored, limit)
		if len(h) != n || buf.rescored > limit {
			t.Fatalf("%d rows: %d kept, %d rescored exactly, want %d kept and at most %d rescored", rows, len(h), buf.rescored, n, limit)
		}
	}
}

// A row rebuilt from its codes is, bit for bit, the message's vector
// normalised (what a float32 row holds), whatever its norm: the scan's
// exact scores and order are those of the float32 rows.
func TestRebuiltRowIsTheNormalisedVector(t *testing.T) {
	for _, dim := range []int{3, 100, 1536} {
		c := &collection{dim: dim, row: map[string]int{}}
		for i := range 200 {
			vec := storeRoundTrip(hashVec(fmt.Sprint("v", dim, i), dim))
			for j := range vec {
				vec[j] *= float32(i%7) / 3 // norms 0 (all zero), below and above 1
			}
			vec = storeRoundTrip(vec)
			c.put(&memory.Message{ID: fmt.Sprint(i)}, vec)
			want := slices.Clone(vec)
			normalize(want)
			if got := c.exact(i, make([]float32, dim)); !slices.Equal(got, want) {
				t.Fatalf("dim %d row %d: rebuilt %v, normalised %v", dim, i, got[:min(dim, 4)], want[:min(dim, 4)])
			}
		}
	}
}
