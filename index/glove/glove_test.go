package glove

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/data"
	"github.com/ctxd/ctxd/index/glove/vecfile"
	"github.com/ctxd/ctxd/memory"
)

var _ memory.Embedder = (*Model)(nil)

func mustDefault(tb testing.TB) *Model {
	tb.Helper()
	m, err := Default()
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func embedOne(tb testing.TB, m *Model, text string) []float32 {
	tb.Helper()
	v, err := m.Embed(context.Background(), []string{text})
	if err != nil {
		tb.Fatal(err)
	}
	return v[0]
}

func norm(v []float32) float64 {
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	return math.Sqrt(ss)
}

func TestDefault(t *testing.T) {
	m := mustDefault(t)
	if m.Dim() != 100 {
		t.Errorf("Dim() = %d, want 100", m.Dim())
	}
	if !strings.HasPrefix(m.Model(), "glove-6b-100d-sif-v1-100k-") {
		t.Errorf("Model() = %q", m.Model())
	}
	if m.Words() != 100000 {
		t.Errorf("Words() = %d", m.Words())
	}
	if m2, _ := Default(); m2 != m {
		t.Error("Default() loaded twice")
	}
	// The name must follow the data: the same file gives the same name,
	// a different one a different name.
	again, err := Load(data.GloVe)
	if err != nil {
		t.Fatal(err)
	}
	if again.Model() != m.Model() {
		t.Errorf("same data, names %q and %q", again.Model(), m.Model())
	}
	other := loadSynthetic(t, []string{"the", "cat"}, [][]float32{{1, 0, 0}, {0, 1, 0}})
	if other.Model() == m.Model() {
		t.Error("different data, same name")
	}
}

func TestEmbedDeterministicUnit(t *testing.T) {
	m := mustDefault(t)
	other, err := Load(bytes.Clone(data.GloVe))
	if err != nil {
		t.Fatal(err)
	}
	texts := []string{
		"The deployment failed last night.",
		"I love baking chocolate cake!",
		"", "   ", "12345 ## 😀", "how are you?", "self-expression", "O'Neill's team won't deploy",
		strings.Repeat("memory server latency ", 200),
	}
	a, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := other.Embed(context.Background(), texts)
	for i := range texts {
		if len(a[i]) != 100 {
			t.Fatalf("%q: %d values", texts[i], len(a[i]))
		}
		if !slices.Equal(a[i], b[i]) {
			t.Errorf("%q: vectors differ between loads", texts[i])
		}
		// Unit length, as the index ranks by the dot product of unit vectors.
		if n := norm(a[i]); math.Abs(n-1) > 1e-6 {
			t.Errorf("%q: norm %v", texts[i], n)
		}
	}
}

func TestEmbedNoKnownWords(t *testing.T) {
	m := mustDefault(t)
	empty := embedOne(t, m, "")
	if !slices.Equal(empty, m.common) {
		t.Error("empty text is not the common direction")
	}
	if v := embedOne(t, m, "4711 -- 😀 #"); !slices.Equal(v, empty) {
		t.Error("a text of unknown tokens differs from the empty text")
	}
	for _, text := range []string{"the deployment failed", "how are you?"} {
		if c := dot(embedOne(t, m, text), empty); math.Abs(float64(c)) > 1e-5 {
			t.Errorf("%q: cosine %v with the no-words vector, want 0", text, c)
		}
	}
	// A text of stopwords only falls back to them rather than to nothing.
	if c := dot(embedOne(t, m, "how are you?"), embedOne(t, m, "what are they?")); c < 0.5 {
		t.Errorf("stopword-only texts: cosine %v", c)
	}
}

func TestParaphrase(t *testing.T) {
	m := mustDefault(t)
	cases := []struct{ q, near, far string }{
		{"the deployment failed last night", "our release broke yesterday evening", "I love baking chocolate cake"},
		{"my grandmother passed away last year", "my grandma died recently", "the server is running out of memory"},
		{"the database query is too slow", "fetching records from sql takes forever", "we went camping in the mountains"},
	}
	for _, c := range cases {
		q := embedOne(t, m, c.q)
		near, far := dot(q, embedOne(t, m, c.near)), dot(q, embedOne(t, m, c.far))
		if near <= far {
			t.Errorf("%q: paraphrase %.3f <= unrelated %.3f", c.q, near, far)
		}
	}
}

// TestProbe reports the paraphrase probe for each part of the method, and
// checks the full method still beats the plain mean it replaces.
func TestProbe(t *testing.T) {
	m := mustDefault(t)
	variants := []struct {
		name string
		cfg  embedConfig
	}{
		{"plain mean", embedConfig{}},
		{"plain mean, stopwords dropped", embedConfig{dropStop: true}},
		{"SIF", embedConfig{sif: true}},
		{"SIF, stopwords dropped", embedConfig{sif: true, dropStop: true}},
		{"SIF, stopwords dropped, common direction removed", sifConfig},
	}
	mrr := make([]float64, len(variants))
	for i, v := range variants {
		mrr[i] = probeMRR(m, v.cfg)
		t.Logf("probe MRR %.3f  %s", mrr[i], v.name)
	}
	if mrr[len(mrr)-1] <= mrr[0] {
		t.Errorf("SIF with the common direction removed (%.3f) does not beat the plain mean (%.3f)", mrr[len(mrr)-1], mrr[0])
	}
}

func TestTokens(t *testing.T) {
	m := mustDefault(t)
	cases := []struct {
		in   string
		want string // tokens joined by spaces
	}{
		{"Don't stop", "do n't stop"},
		{"I can't, won't; it's John's.", "i ca n't , wo n't ; it 's john 's ."},
		{"They’re here and we'll see", "they 're here and we 'll see"},
		{"Hello, World!", "hello , world !"},
		{"e-mail me (at 3.5 or 10,000)", "e-mail me ( at 3.5 or 10,000 )"},
		{"end.start a-", "end . start a -"},
		{"rock'n'roll O'Neill", "rock'n'roll o'neill"},
		{"the dogs' toys", "the dogs ' toys"},
		{"ÉCOLE Straße", "école straße"},
		{"user_id=42", "user _ id = 42"},
		{"tab\tand\nnewline\u00a0nbsp", "tab and newline nbsp"},
		{"...!?", ". . . ! ?"},
		{"", ""},
	}
	for _, c := range cases {
		if got := strings.Join(m.Tokens(c.in), " "); got != c.want {
			t.Errorf("Tokens(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestEmbedCompoundFallback(t *testing.T) {
	m := mustDefault(t)
	// An unknown compound is embedded by its parts rather than dropped.
	if _, ok := m.index["deployment-related"]; ok {
		t.Skip("the compound is a word of its own")
	}
	a := embedOne(t, m, "deployment-related")
	if b := embedOne(t, m, "deployment related"); dot(a, b) < 0.999 {
		t.Errorf("compound and its parts: cosine %v", dot(a, b))
	}
}

func TestEmbedCancelled(t *testing.T) {
	m := mustDefault(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Embed(ctx, []string{"a"}); !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestEmbedConcurrent(t *testing.T) {
	m := mustDefault(t)
	texts := make([]string, len(probePairs))
	for i, p := range probePairs {
		texts[i] = p[0] + " " + p[1]
	}
	want, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for range 20 {
				got, err := m.Embed(context.Background(), texts)
				if err != nil {
					t.Error(err)
					return
				}
				for i := range got {
					if !slices.Equal(got[i], want[i]) {
						t.Errorf("goroutine %d: %q differs", g, texts[i])
						return
					}
				}
				m.Neighbours([]string{"car", "river", "music"}[g%3], 5, 0.5)
			}
		})
	}
	wg.Wait()
}

func TestNeighbours(t *testing.T) {
	m := mustDefault(t)
	got := m.Neighbours("Car", 10, 0.5)
	if len(got) == 0 || len(got) > 10 {
		t.Fatalf("Neighbours(Car) = %v", got)
	}
	words := make([]string, len(got))
	for i, nb := range got {
		words[i] = nb.Word
		if nb.Word == "car" || nb.Cos < 0.5 || nb.Cos > 1.0001 {
			t.Errorf("bad neighbour %+v", nb)
		}
		if i > 0 && nb.Cos > got[i-1].Cos {
			t.Errorf("not sorted: %v", got)
		}
		if m.kind[m.index[nb.Word]] != kindContent {
			t.Errorf("neighbour %q is a stopword or punctuation", nb.Word)
		}
	}
	if !slices.Contains(words, "vehicle") && !slices.Contains(words, "cars") {
		t.Errorf("car's neighbours: %v", words)
	}
	if again := m.Neighbours("car", 10, 0.5); !slices.Equal(again, got) {
		t.Errorf("cached result differs: %v", again)
	}
	// More than the cache keeps: recomputed, and the first ten agree.
	long := m.Neighbours("car", 50, -1)
	if len(long) != 50 || !slices.Equal(long[:len(got)], got) {
		t.Errorf("Neighbours(car, 50) = %d, prefix %v", len(long), long[:min(len(long), len(got))])
	}
	if few := m.Neighbours("car", 3, 0); len(few) != 3 {
		t.Errorf("n=3 gave %d", len(few))
	}
	if strict := m.Neighbours("car", 10, 0.99); len(strict) != 0 {
		t.Errorf("minCos 0.99 gave %v", strict)
	}
	if m.Neighbours("xqzvkw", 5, 0) != nil || m.Neighbours("car", 0, 0) != nil {
		t.Error("unknown word or n=0 gave neighbours")
	}
}

// The scan over the packed rows must give the Go scan's list exactly: the
// same words, cosines and order, for any n, also where the assembly runs
// its tail (dimensions that are not a multiple of 16).
func TestScanPackedMatchesScanEach(t *testing.T) {
	m := mustDefault(t)
	m.normsOnce.Do(m.computeNorms)
	words := []string{"car", "deployment", "river", "music", "the", ",", "."}
	for i := 7; i < m.Words(); i += m.Words() / 16 {
		words = append(words, m.words[i])
	}
	for _, w := range words {
		id, ok := m.index[w]
		if !ok {
			t.Fatalf("%q not in the model", w)
		}
		// A shorter list is a prefix of a longer one (the scalar scan is
		// slow under -race: it runs once per word).
		all := m.scanEach(id, 200)
		for _, n := range []int{1, 5, 32, 200} {
			if got, want := m.scanPacked(id, n), all[:n]; !slices.Equal(got, want) {
				t.Fatalf("%q n=%d: packed %v, want %v", w, n, got, want)
			}
		}
	}

	// Tied cosines keep the more frequent word first.
	vecs := [][]float32{{1, 0.5, 0}, {0, 0, 1}, {1, 1, 0.25}, {2, 2, 0.5}, {0, 1, 0}, {3, 3, 0.75}}
	syn := loadSynthetic(t, []string{"w0", "w1", "w2", "w3", "w4", "w5"}, vecs)
	syn.normsOnce.Do(syn.computeNorms)
	for n := 1; n <= 6; n++ {
		want := syn.scanEach(0, n)
		if got := syn.scanPacked(0, n); !slices.Equal(got, want) {
			t.Fatalf("synthetic n=%d: packed %v, want %v", n, got, want)
		}
	}
	if got := syn.scanPacked(0, 3); len(got) != 3 || got[0].Word != "w2" || got[1].Word != "w3" || got[2].Word != "w5" {
		t.Errorf("ties: %v, want w2, w3, w5 first", got)
	}
}

func TestNeighbourCacheBounded(t *testing.T) {
	m := loadSynthetic(t, []string{"a1", "b1", "c1"}, [][]float32{{1, 0}, {1, 1}, {0, 1}})
	for range 2 {
		if nb := m.Neighbours("a1", 5, -1); len(nb) != 2 || nb[0].Word != "b1" {
			t.Fatalf("Neighbours(a1) = %v", nb)
		}
	}
	for i := len(m.nbCache); i < neighbourCacheSize; i++ {
		m.nbCache[fmt.Sprint(i)] = nbEntry{}
	}
	m.Neighbours("c1", 1, -1)
	if _, ok := m.nbCache["c1"]; !ok || len(m.nbCache) != neighbourCacheSize {
		t.Errorf("cache holds %d entries, bound %d", len(m.nbCache), neighbourCacheSize)
	}
}

// loadSynthetic makes a model of a few words, with ranks from a vocabulary of
// 1000.
func loadSynthetic(tb testing.TB, words []string, vecs [][]float32) *Model {
	tb.Helper()
	var buf bytes.Buffer
	if err := vecfile.Encode(&buf, 1000, words, vecs); err != nil {
		tb.Fatal(err)
	}
	m, err := Load(buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestLoadErrors(t *testing.T) {
	good := data.GloVe
	flip := bytes.Clone(good)
	flip[len(flip)/2] ^= 1
	badMagic := bytes.Clone(good)
	badMagic[0] = 'X'
	cases := map[string][]byte{
		"empty":         nil,
		"header only":   good[:28],
		"truncated":     good[:len(good)-1],
		"half":          good[:len(good)/2],
		"trailing data": append(bytes.Clone(good), 0),
		"flipped bit":   flip,
		"bad magic":     badMagic,
	}
	for name, b := range cases {
		if _, err := Load(b); err == nil {
			t.Errorf("%s: no error", name)
		} else if !strings.HasPrefix(err.Error(), "glove: ") {
			t.Errorf("%s: error %q lacks context", name, err)
		}
	}
}

func BenchmarkEmbed(b *testing.B) {
	m := mustDefault(b)
	// 60 words of the kind ctxd stores: a conversational turn with some
	// punctuation, contractions and a number.
	text := "Yesterday evening the deployment of the payments service failed because the database " +
		"migration timed out after 30 minutes; we rolled back, and I've asked Maria to check why " +
		"the connection pool wasn't released. Can you look at the logs from last night and tell me " +
		"whether the retry logic kicked in before the alert fired? It was a long night."
	if n := len(strings.Fields(text)); n != 60 {
		b.Fatalf("%d words", n)
	}
	texts := []string{text}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Embed(ctx, texts); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Load(data.GloVe); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkNeighbours measures the uncached scan over every word, in Go a
// row at a time and with the assembly over the packed rows.
func BenchmarkNeighbours(b *testing.B) {
	m := mustDefault(b)
	// The norms and packed rows are made once; keep them out.
	m.normsOnce.Do(m.computeNorms)
	m.rowsOnce.Do(m.packRows)
	id := m.index["deployment"]
	for _, scan := range []struct {
		name string
		fn   func(int32, int) []Neighbour
	}{{"each", m.scanEach}, {"packed", m.scanPacked}} {
		b.Run(scan.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu0 := cpuTime()
			for b.Loop() {
				scan.fn(id, cachedNeighbours)
			}
			// CPU beside wall time: on the shared machine a wait for the
			// core shows in one and not the other.
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkNeighboursCached(b *testing.B) {
	m := mustDefault(b)
	m.Neighbours("deployment", 5, 0.6)
	b.ReportAllocs()
	for b.Loop() {
		m.Neighbours("deployment", 5, 0.6)
	}
}
