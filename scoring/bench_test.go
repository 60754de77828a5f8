package scoring

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// session builds n messages of about 60 words: Zipf-distributed prose over
// a 5,000-word vocabulary, with identifiers, paths, URLs and numbers that
// later messages sometimes repeat, as in an agent's coding session.
func session(n int, seed uint64) ([]Candidate, []Doc) {
	r := rand.New(rand.NewPCG(seed, 1))
	vocab := make([]string, 5000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("%s%s", syllables[i%len(syllables)], syllables[(i/len(syllables))%len(syllables)]) + strings.Repeat("x", i/(len(syllables)*len(syllables)))
	}
	zipf := rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))
	var specials []string
	cands := make([]Candidate, n)
	docs := make([]Doc, n)
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var b strings.Builder
	for i := range n {
		b.Reset()
		for w := range 60 {
			if w > 0 {
				b.WriteByte(' ')
			}
			switch x := r.IntN(100); {
			case x < 3:
				s := fmt.Sprintf("ERR_%s_%d", strings.ToUpper(vocab[r.IntN(200)]), r.IntN(1000))
				specials = append(specials, s)
				b.WriteString(s)
			case x < 4:
				s := fmt.Sprintf("/srv/%s/%s.go:%d", vocab[r.IntN(300)], vocab[r.IntN(300)], r.IntN(500))
				specials = append(specials, s)
				b.WriteString(s)
			case x < 5:
				s := fmt.Sprintf("https://ci.example.com/job/%d", r.IntN(1e6))
				specials = append(specials, s)
				b.WriteString(s)
			case x < 7 && len(specials) > 0:
				b.WriteString(specials[len(specials)-1-r.IntN(min(len(specials), 50))])
			case x < 9:
				fmt.Fprintf(&b, "%dms", r.IntN(5000))
			default:
				b.WriteString(vocab[zipf.Uint64()])
			}
		}
		id := fmt.Sprintf("01J%023d", i)
		text := b.String()
		cands[i] = Candidate{ID: id, Text: text, Turn: i, CreatedAt: t0.Add(time.Duration(i) * time.Minute),
			Important: i%17 == 0, BM25: r.Float64() * 12, Cosine: r.Float64()*2 - 1}
		docs[i] = Doc{ID: id, Text: text, Turn: i}
	}
	return cands, docs
}

var syllables = strings.Fields("ka lo mi nu pe ra si tu ve wo ba de fi go hu ja ke li mo ny pa qu ri so ta ul vi we xo ya ze an")

func benchmarkScoreAll(b *testing.B, n int) {
	cands, docs := session(n, 1)
	now := cands[n-1].CreatedAt
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ScoreAll(DefaultParams, cands, docs, n-1, now); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/msg")
}

func BenchmarkScoreAll1k(b *testing.B)  { benchmarkScoreAll(b, 1000) }
func BenchmarkScoreAll10k(b *testing.B) { benchmarkScoreAll(b, 10000) }

func BenchmarkTerms(b *testing.B) {
	cands, _ := session(100, 2)
	b.ReportAllocs()
	for b.Loop() {
		for _, c := range cands {
			Terms(c.Text)
		}
	}
}
