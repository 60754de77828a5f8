package index

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ctxd/ctxd/memory"
)

// The analyzer passes on no token longer than maxTokenRunes, so a message
// that is one long run of a letter is indexed at a cost in proportion to
// its length, and is still found by its start. A run of "y" is the
// Snowball stemmer's worst case: 0.37 s at 25k letters, minutes at 1 MiB.
func TestLongTokensAreCut(t *testing.T) {
	x := openTest(t, Options{})
	an := x.text.Mapping().AnalyzerNamed(analyzerName)
	for _, text := range []string{strings.Repeat("y", 4096), strings.Repeat("ж", 300) + " deploy"} {
		for _, tok := range an.Analyze([]byte(text)) {
			if n := utf8.RuneCount(tok.Term); n > maxTokenRunes {
				t.Fatalf("a token of %d runes passed the analyzer, want at most %d", n, maxTokenRunes)
			}
		}
	}
	long := msg("t", "s", "long", strings.Repeat("y", 1<<20)+" zebrafish", 1)
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{long, msg("t", "s", "short", "yyy zebrafish", 2)}, Watermark: 1})
	for _, q := range []string{strings.Repeat("y", maxTokenRunes), strings.Repeat("y", 5000), "zebrafish"} {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: q, Mode: memory.ModeText, K: 5})
		if !hasID(hits, "long") {
			t.Errorf("search %.20q... (%d runes): %v, want the 1 MiB message", q, len(q), ids(hits))
		}
	}
}

// BenchmarkApplyLongRun indexes one message that is a single run of "y"
// (the stemmer's worst letter): the cost per byte stays flat as the run
// grows. Before tokens were cut: 0.43 s at 25 kB, 56 s at 200 kB.
func BenchmarkApplyLongRun(b *testing.B) {
	for _, size := range []int{25_000, 200_000, 1 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			x := openTest(b, Options{})
			b.SetBytes(int64(size))
			for i := range b.N {
				m := msg("t", "s", "m", strings.Repeat("y", size), 1)
				if err := x.Apply(context.Background(), memory.IndexBatch{Upserts: []*memory.Message{m}, Watermark: uint64(i + 1)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// A long query is searched for by its distinct words: a 1 MB prompt of a
// few words repeated becomes those few words, and still finds what they
// match; a prompt of ordinary length is searched as written.
func TestLongQueryBounded(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("t", "s", "m", "the walrus deploys staging", 1)}, Watermark: 1})
	long := strings.Repeat("Walrus deploys the staging cluster ", 1<<20/35)
	if got := x.boundQuery(long); got != "Walrus deploys staging cluster" { // "the" is a stop word
		t.Fatalf("a 1 MB query of 5 words repeated is searched as %.80q (%d bytes)", got, len(got))
	}
	short := "walrus walrus deploys"
	if got := x.boundQuery(short); got != short {
		t.Fatalf("a short query became %q", got)
	}
	var distinct strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&distinct, "w%d ", i)
	}
	if got := len(strings.Fields(x.boundQuery(distinct.String()))); got != maxQueryTerms {
		t.Fatalf("a query of 5,000 distinct words kept %d, want %d", got, maxQueryTerms)
	}
	if hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: long, Mode: memory.ModeText, K: 5}); !hasID(hits, "m") {
		t.Fatalf("the 1 MB query found %v", ids(hits))
	}
}
