package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
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
			approx, bound := qq.approx(acc, scale, l1)
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
	if score, bound := qq.approx(0, 0.5, 1); score != 0 || bound != quantSlack {
		t.Fatalf("zero query: score %v bound %v", score, bound)
	}
}
