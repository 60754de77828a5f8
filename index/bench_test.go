package index

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

const benchDim = 100

func TestMain(m *testing.M) {
	code := m.Run()
	benchIndexes.Lock()
	for _, b := range benchIndexes.m {
		_ = b.x.Close()
		if b.dir != "" {
			_ = os.RemoveAll(b.dir)
		}
	}
	benchIndexes.Unlock()
	closeFuzzIndex()
	os.Exit(code)
}

type benchIndex struct {
	x      *Index
	n      int
	dir    string
	corpus *corpus
	texts  *memTexts // the messages' texts, for snippets
}

// benchIndexes caches the big indexes across benchmarks: 100k documents take
// ~30 s to build.
var benchIndexes = struct {
	sync.Mutex
	m map[int]*benchIndex
}{m: map[int]*benchIndex{}}

// buildBenchIndex returns an index of n generated messages over 100
// sessions. With CTXD_BENCH_DIR set, the text side is kept there and reused by
// later runs (the vectors are loaded again).
func buildBenchIndex(b *testing.B, n int, opts Options) *benchIndex {
	benchIndexes.Lock()
	defer benchIndexes.Unlock()
	if bi := benchIndexes.m[n]; bi != nil {
		opts.Texts = bi.texts
		bi.x.opts, _ = opts.withDefaults()
		return bi
	}
	dir, keep := os.Getenv("CTXD_BENCH_DIR"), true
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "ctxd-index-bench"); err != nil {
			b.Fatal(err)
		}
		keep = false
	}
	c := newCorpus(42)
	msgs := c.messages("t", n, 100, benchDim, t0)
	opts.Texts = textsOf(msgs)
	x, err := Open(filepath.Join(dir, fmt.Sprintf("idx%d", n)), opts)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	if wm, _ := x.Watermark(); wm == uint64(n) {
		for i := 0; i < n; i += 1000 {
			if err := x.LoadVectors(ctx, msgs[i:min(i+1000, n)]); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("reopened %d docs and loaded their vectors in %v", n, time.Since(start).Round(time.Millisecond))
	} else {
		for i := 0; i < n; i += 1000 {
			if err := x.Apply(ctx, memory.IndexBatch{Upserts: msgs[i:min(i+1000, n)], Watermark: uint64(min(i+1000, n))}); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("built %d docs in %v", n, time.Since(start).Round(time.Millisecond))
	}
	waitForMerges(b, x)
	bi := &benchIndex{x: x, n: n, dir: dir, corpus: c, texts: opts.Texts.(*memTexts)}
	if keep {
		bi.dir = "" // not removed at the end
	}
	benchIndexes.m[n] = bi
	return bi
}

// waitForMerges waits (up to a minute) until Bleve's background merging has
// settled, so that benchmarks measure a steady index, as a server has most of
// the time, not one with dozens of fresh segments.
func waitForMerges(b *testing.B, x *Index) {
	segments := func() string {
		st, _ := x.text.StatsMap()["index"].(map[string]any)
		return fmt.Sprint(st["num_root_memorysegments"], "/", st["num_root_filesegments"])
	}
	start, last, stable := time.Now(), segments(), 0
	for stable < 3 && time.Since(start) < time.Minute {
		time.Sleep(time.Second)
		if now := segments(); now == last {
			stable++
		} else {
			last, stable = now, 0
		}
	}
	b.Logf("segments (memory/file) %s after %v", last, time.Since(start).Round(time.Second))
}

// BenchmarkApply writes batches of 100 messages of 60 words with 100-d vectors.
func BenchmarkApply(b *testing.B) {
	x := openTest(b, Options{})
	c := newCorpus(7)
	msgs := c.messages("t", 100*b.N, 100, benchDim, t0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := x.Apply(context.Background(), memory.IndexBatch{Upserts: msgs[i*100 : (i+1)*100], Watermark: uint64(i + 1)}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkSearch runs queries of 6 corpus words (about 3 after stop words)
// and a random vector over 10k and 100k messages in 100 sessions, across all
// sessions and within one.
func BenchmarkSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		for _, scope := range []string{"cross", "single"} {
			for _, mode := range []string{memory.ModeHybrid, memory.ModeText, memory.ModeVector} {
				b.Run(fmt.Sprintf("%dk/%s/%s", n/1000, scope, mode), func(b *testing.B) {
					runSearchBench(b, buildBenchIndex(b, n, Options{}), searchVariant{scope, mode, "", 0})
				})
			}
		}
		// The server always asks for snippets: this is a POST /v1/search
		// across sessions.
		b.Run(fmt.Sprintf("%dk/cross/hybrid+highlight", n/1000), func(b *testing.B) {
			runSearchBench(b, buildBenchIndex(b, n, Options{}), searchVariant{"cross", memory.ModeHybrid, "highlight", 0})
		})
		b.Run(fmt.Sprintf("%dk/cross/hybrid+highlight+states+since", n/1000), func(b *testing.B) {
			runSearchBench(b, buildBenchIndex(b, n, Options{}), searchVariant{"cross", memory.ModeHybrid, "highlight+states+since", 0})
		})
	}
}

// BenchmarkSearchMix interleaves the variants at 100k documents, for
// comparing them on a busy machine.
func BenchmarkSearchMix(b *testing.B) {
	var vs []searchVariant
	for _, extras := range []string{"", "highlight", "states", "since", "highlight+states+since"} {
		vs = append(vs, searchVariant{"cross", memory.ModeHybrid, extras, 0})
	}
	vs = append(vs, searchVariant{"cross", memory.ModeText, "", 0}, searchVariant{"cross", memory.ModeVector, "", 0}, searchVariant{"single", memory.ModeHybrid, "", 0})
	runSearchBench(b, buildBenchIndex(b, 100_000, Options{}), vs...)
}

// BenchmarkVectorParallelism compares scanning the 100 collections one after
// another with scanning them on a bounded pool, interleaved.
func BenchmarkVectorParallelism(b *testing.B) {
	var vs []searchVariant
	for _, p := range []int{1, 2, 4} {
		vs = append(vs, searchVariant{"cross", memory.ModeVector, "", p}, searchVariant{"cross", memory.ModeHybrid, "", p})
	}
	runSearchBench(b, buildBenchIndex(b, 100_000, Options{}), vs...)
}

// searchVariant is one kind of query: scope "cross" or "single", a mode, and
// extras naming what the queries add: "highlight", "states" (two of the
// four), "since" (the newest 3/4).
// parallel, if set, overrides Options.VectorParallelism.
type searchVariant struct {
	scope, mode, extras string
	parallel            int
}

func (v searchVariant) String() string {
	s := v.scope + "/" + v.mode
	if v.extras != "" {
		s += "+" + v.extras
	}
	if v.parallel != 0 {
		s += fmt.Sprintf("+p%d", v.parallel)
	}
	return s
}

func (v searchVariant) queries(bi *benchIndex) []memory.SearchQuery {
	queries := make([]memory.SearchQuery, 256)
	for i := range queries {
		words := make([]string, 6) // about half are stop words
		for j := range words {
			words[j] = bi.corpus.word()
		}
		q := memory.SearchQuery{Tenant: "t", Text: strings.Join(words, " "), Vector: hashVec(fmt.Sprint("q", i), benchDim), Mode: v.mode, K: 10}
		if v.scope == "single" {
			q.Sessions = []string{fmt.Sprintf("s%03d", i%100)}
		}
		q.Highlight = strings.Contains(v.extras, "highlight")
		if strings.Contains(v.extras, "states") {
			q.States = []memory.State{memory.StateActive, memory.StateRecovered}
		}
		if strings.Contains(v.extras, "since") {
			q.Since = t0.Add(time.Duration(bi.n/4) * time.Minute) // a quarter of the messages are older
		}
		queries[i] = q
	}
	return queries
}

// runSearchBench measures Search on the variants, interleaved so that other
// load on the machine hits them alike. It reports wall-clock percentiles per
// variant (one variant: plain p50-ms, p99-ms) and the process CPU time per
// query, which other load does not inflate.
func runSearchBench(b *testing.B, bi *benchIndex, variants ...searchVariant) {
	ctx := context.Background()
	queries := make([][]memory.SearchQuery, len(variants))
	durs := make([][]time.Duration, len(variants))
	for i, v := range variants {
		queries[i] = v.queries(bi)
	}
	cpu0 := cpuTime()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		vi := i % len(variants)
		q := queries[vi][(i/len(variants))%len(queries[vi])]
		if p := variants[vi].parallel; p != 0 {
			bi.x.opts.VectorParallelism = p
		}
		start := time.Now()
		hits, err := bi.x.Search(ctx, q)
		durs[vi] = append(durs[vi], time.Since(start))
		bi.x.opts.VectorParallelism = runtime.GOMAXPROCS(0)
		if err != nil {
			b.Fatal(err)
		}
		if len(hits) == 0 && q.Mode != memory.ModeText {
			b.Fatalf("no hits for %+v", q)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	for i, v := range variants {
		prefix := ""
		if len(variants) > 1 {
			prefix = v.String() + "-"
		}
		reportPercentiles(b, prefix, durs[i])
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportPercentiles(b *testing.B, prefix string, durs []time.Duration) {
	if len(durs) == 0 {
		return
	}
	slices.Sort(durs)
	at := func(p float64) float64 {
		return float64(durs[min(len(durs)-1, int(p*float64(len(durs))))].Microseconds()) / 1000
	}
	b.ReportMetric(at(0.5), prefix+"p50-ms")
	b.ReportMetric(at(0.99), prefix+"p99-ms")
}

// BenchmarkLoadVectors fills the vector side with 100k 100-d vectors in chunks
// of 1,000, as the server does at start-up.
func BenchmarkLoadVectors(b *testing.B) {
	c := newCorpus(3)
	msgs := c.messages("t", 100_000, 100, benchDim, t0)
	for _, m := range msgs {
		m.Content = ""
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		x := openTest(b, Options{})
		b.StartTimer()
		for i := 0; i < len(msgs); i += 1000 {
			if err := x.LoadVectors(context.Background(), msgs[i:i+1000]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if _, v, _ := x.Count(); v != 100_000 {
			b.Fatalf("%d vectors", v)
		}
		_ = x.Close()
		b.StartTimer()
	}
}
