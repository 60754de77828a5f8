package simd

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"syscall"
	"testing"
	"time"
)

// The assembly must give the scores of the Go loop (up to rounding: it adds
// in another order) for every dimension, including ones that are not a
// multiple of 8 or 16.
func TestDotRowsSIMDMatchesGo(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2+FMA on this machine")
	}
	for _, dim := range []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 100, 384, 1536} {
		const n = 37
		q := randVec(fmt.Sprint("q", dim), dim)
		rows := make([]float32, 0, n*dim)
		for i := range n {
			rows = append(rows, randVec(fmt.Sprint(dim, "r", i), dim)...)
		}
		got, want := make([]float32, n), make([]float32, n)
		dotRowsSIMD(q, rows, got)
		DotRowsGeneric(q, rows, want)
		for i := range n {
			if math.Abs(float64(got[i]-want[i])) > 1e-5 {
				t.Fatalf("dim %d row %d: assembly %v, Go %v", dim, i, got[i], want[i])
			}
		}
	}
}

func TestDotRowsEmpty(t *testing.T) {
	DotRows([]float32{1, 2}, nil, nil) // no rows: nothing to write, no panic
	DotRowsInt8([]int16{1, 2}, nil, nil)
}

// The int8 dot product is exact: the assembly must equal the sum for every
// dimension, tails included, up to the extreme codes.
func TestDotRowsInt8MatchesGo(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2 on this machine")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, dim := range []int{1, 7, 15, 16, 17, 31, 32, 33, 100, 384, 1536} {
		const n = 23
		q := make([]int16, dim)
		rows := make([]int8, n*dim)
		// The largest query code for which no sum can overflow int32.
		levels := min(math.MaxInt16, math.MaxInt32/(127*dim))
		for i := range q {
			q[i] = int16(r.IntN(2*levels+1) - levels)
		}
		for i := range rows {
			rows[i] = int8(r.IntN(255) - 127)
		}
		for i := range q { // the largest sum
			q[i], rows[i] = int16(-levels), -127
		}
		got, gen := make([]int32, n), make([]int32, n)
		dotRowsInt8SIMD(q, rows, got)
		DotRowsInt8Generic(q, rows, gen)
		for i := range n {
			var want int64 // no overflow here
			for j := range dim {
				want += int64(q[j]) * int64(rows[i*dim+j])
			}
			if int64(got[i]) != want || int64(gen[i]) != want {
				t.Fatalf("dim %d row %d: assembly %d, Go %d, want %d", dim, i, got[i], gen[i], want)
			}
		}
	}
}

// BenchmarkDotRows scores one session's rows (1k, in cache) and all of
// 100k (40 MB of float32 or 10 MB of int8, from memory).
func BenchmarkDotRows(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) { benchDotRows(b, n) })
	}
}

func benchDotRows(b *testing.B, n int) {
	const dim = 100
	q := randVec("q", dim)
	rows := make([]float32, 0, n*dim)
	for i := range n {
		rows = append(rows, randVec(fmt.Sprint("r", i), dim)...)
	}
	out := make([]float32, n)
	q8 := make([]int16, dim)
	for j, x := range q {
		q8[j] = int16(x * 32767)
	}
	rows8 := make([]int8, len(rows))
	for j, x := range rows {
		rows8[j] = int8(x * 127)
	}
	out8 := make([]int32, n)
	for _, impl := range []struct {
		name string
		fn   func()
	}{
		{"go", func() { DotRowsGeneric(q, rows, out) }},
		{"simd", func() { DotRows(q, rows, out) }},
		{"int8-go", func() { DotRowsInt8Generic(q8, rows8, out8) }},
		{"int8-simd", func() { DotRowsInt8(q8, rows8, out8) }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			cpu0 := cpuTime()
			for b.Loop() {
				impl.fn()
			}
			b.ReportMetric(float64((cpuTime()-cpu0).Nanoseconds())/float64(b.N*n*dim), "cpu-ns/dim")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n*dim), "ns/dim")
		})
	}
}

// randVec is a deterministic pseudo-random unit vector of dimension dim.
func randVec(seed string, dim int) []float32 {
	h := fnv.New64a()
	h.Write([]byte(seed))
	r := rand.New(rand.NewPCG(h.Sum64(), 7))
	v := make([]float32, dim)
	var ss float64
	for i := range v {
		v[i] = float32(r.NormFloat64())
		ss += float64(v[i]) * float64(v[i])
	}
	inv := float32(1 / math.Sqrt(ss))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
