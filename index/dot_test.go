package index

import (
	"fmt"
	"math"
	"testing"
)

// The assembly must give the scores of the Go loop (up to rounding: it adds
// in another order) for every dimension, including ones that are not a
// multiple of 8 or 16.
func TestDotRowsSIMDMatchesGo(t *testing.T) {
	if !useSIMD {
		t.Skip("no AVX2+FMA on this machine")
	}
	for _, dim := range []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 100, 384, 1536} {
		const n = 37
		q := hashVec(fmt.Sprint("q", dim), dim)
		rows := make([]float32, 0, n*dim)
		for i := range n {
			rows = append(rows, hashVec(fmt.Sprint(dim, "r", i), dim)...)
		}
		got, want := make([]float32, n), make([]float32, n)
		dotRowsSIMD(q, rows, got)
		dotRowsGeneric(q, rows, want)
		for i := range n {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				t.Fatalf("dim %d row %d: assembly %v, Go %v", dim, i, got[i], want[i])
			}
		}
	}
}

func TestDotRowsEmpty(t *testing.T) {
	dotRows([]float32{1, 2}, nil, nil) // no rows: nothing to write, no panic
}

// BenchmarkDotRows scores one session's rows (1k, in cache) and all of
// 100k (40 MB, from memory).
func BenchmarkDotRows(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchDotRows(b, n) })
	}
}

func benchDotRows(b *testing.B, n int) {
	const dim = 100
	q := hashVec("q", dim)
	rows := make([]float32, 0, n*dim)
	for i := range n {
		rows = append(rows, hashVec(fmt.Sprint("r", i), dim)...)
	}
	out := make([]float32, n)
	for _, impl := range []struct {
		name string
		fn   func(q, rows, out []float32)
	}{{"go", dotRowsGeneric}, {"simd", dotRows}} {
		b.Run(impl.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				impl.fn(q, rows, out)
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n*dim), "cpu-ns/dim")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*dim), "ns/dim")
		})
	}
}
