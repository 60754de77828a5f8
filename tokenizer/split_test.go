package tokenizer

import (
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	"github.com/pkoukk/tiktoken-go"
)

// References, built once per test process: tiktoken-go's own encodings
// (its pattern and rank loading, not the copies in specs) and regexp2 on
// the patterns.
var (
	refOnce sync.Once
	refEncs map[string]*tiktoken.Tiktoken
	refRes  map[string]*regexp2.Regexp
	refTok  *Tokenizer
	refErr  error
)

func references(t testing.TB) (map[string]*tiktoken.Tiktoken, map[string]*regexp2.Regexp, *Tokenizer) {
	refOnce.Do(func() {
		refEncs, refRes, refTok = map[string]*tiktoken.Tiktoken{}, map[string]*regexp2.Regexp{}, New()
		for name, spec := range specs {
			if refEncs[name], refErr = tiktoken.GetEncoding(name); refErr != nil {
				return
			}
			if refRes[name], refErr = regexp2.Compile(spec.pattern, regexp2.None); refErr != nil {
				return
			}
			if _, refErr = refTok.encoding(name); refErr != nil {
				return
			}
		}
	})
	if refErr != nil {
		t.Fatal(refErr)
	}
	return refEncs, refRes, refTok
}

// alphabet holds a character of every class the patterns tell apart, and
// the sequences that take their rarer branches.
var alphabet = []string{
	"a", "b", "e", "s", "Z", "S", "T", "L", "é", "ß", "Σ", "ǅ", "ʰ", "ﬁ", "日本", "ا", "\u0301", "\u0903", "\u20dd",
	"!", "-", "=", "/", ".", ",", "'", "'s", "'S", "'ll", "'Re", "'vE", "'d", "'m", "'t", "'x", "’",
	" ", "  ", "\n", "\r\n", "\r", "\t", "\v", "\f", "\u0085", "\u00a0", "\u2003", "\u3000", "\u2028",
	"7", "42", "٣", "Ⅻ", "½", "😀", "👍🏽", "\u200d", "\x00", "\x1f", "ſ", "İ", "K",
}

func randomText(rng *rand.Rand, longRuns bool) string {
	var b strings.Builder
	for range 1 + rng.IntN(6) {
		if longRuns && rng.IntN(3) == 0 {
			b.WriteString(strings.Repeat(alphabet[rng.IntN(len(alphabet))], 1+rng.IntN(500)))
			continue
		}
		for range 1 + rng.IntN(40) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
	}
	return b.String()
}

// regexpPieces is tiktoken-go's split: regexp2 over the text's runes.
func regexpPieces(t testing.TB, re *regexp2.Regexp, text string) []string {
	var out []string
	runes := []rune(text)
	m, err := re.FindRunesMatch(runes)
	for m != nil && err == nil {
		out = append(out, string(runes[m.Index:m.Index+m.Length]))
		m, err = re.FindNextMatch(m)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func splitPieces(split splitter, text string) []string {
	var out []string
	for i := 0; i < len(text); {
		j := split(text, i)
		if j <= i {
			return append(out, "<no progress>")
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}

func checkSplit(t testing.TB, enc, text string) {
	_, res, _ := references(t)
	want := regexpPieces(t, res[enc], text)
	if !utf8.ValidString(text) {
		text = string([]rune(text))
	}
	got := splitPieces(splitters[enc], text)
	for i := range max(len(got), len(want)) {
		if i >= len(got) || i >= len(want) || got[i] != want[i] {
			t.Fatalf("%s split of %q differs at piece %d:\n got %q\nwant %q", enc, text, i, got[i:], want[min(i, len(want)):])
		}
	}
}

func checkCount(t testing.TB, enc, text string) {
	encs, _, tok := references(t)
	got, err := tok.Count(enc, text)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(encs[enc].EncodeOrdinary(text)); got != want {
		t.Fatalf("%s: %d tokens, tiktoken-go %d, for %q", enc, got, want, text[:min(len(text), 120)])
	}
}

// The split finds exactly regexp2's pieces on text made of every class and
// branch the patterns distinguish.
func TestSplitMatchesRegexp(t *testing.T) {
	// The two slowest tests of the package run side by side: each has
	// its own tokenizer (this one the references', LongRun a New one).
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	for enc := range specs {
		for _, text := range selfCheck {
			checkSplit(t, enc, text)
		}
		for range 3000 {
			checkSplit(t, enc, randomText(rng, false))
		}
	}
}

// Counts equal tiktoken-go's, on short pieces (the quadratic merge) and on
// long runs (the heap merge), and on invalid UTF-8.
func TestCountMatchesTiktoken(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	texts := []string{strings.Repeat("a", 3000), strings.Repeat("ab", 1000), strings.Repeat("!", 2500),
		strings.Repeat(" ", 2000) + "x", "The quick brown fox " + strings.Repeat("jumps", 400) + " over the lazy dog.",
		strings.Repeat("\n", 1000), strings.Repeat("AbC", 700), strings.Repeat("Ω", 900), "a\xffb\xc0\xafc  \xed\xa0\xbd",
		strings.Repeat("\xff", 300), "supercalifragilisticexpialidocious_" + strings.Repeat("x9", 40)}
	for range 200 {
		texts = append(texts, randomText(rng, true))
	}
	long := 0
	for _, text := range texts {
		for enc := range specs {
			checkCount(t, enc, text)
		}
		if strings.Count(text, text[:1]) > shortPiece {
			long++
		}
	}
	if long < 25 {
		t.Fatalf("only %d texts with long runs: the heap merge is not exercised", long)
	}
}

// A 1 MiB run of one letter, within the content limit, is counted (it took
// tiktoken-go hours); the count grows with the text, as tokens do.
func TestLongRunIsCounted(t *testing.T) {
	t.Parallel()
	tok := New()
	small, err := tok.Count("o200k_base", strings.Repeat("a", 64<<10))
	if err != nil {
		t.Fatal(err)
	}
	big, err := tok.Count("o200k_base", strings.Repeat("a", 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if small <= 0 || big < 15*small || big > (1<<20) {
		t.Fatalf("64 KiB of a: %d tokens, 1 MiB: %d", small, big)
	}
}

// The load-time check refuses a counter that disagrees with tiktoken-go.
func TestSelfCheckRefusesAWrongSplit(t *testing.T) {
	ranks := specsRanks(t, "o200k_base")
	byByte := func(s string, i int) int { return i + 1 }
	if err := check("o200k_base", &bpe{ranks: ranks, split: byByte}); err == nil {
		t.Fatal("a split into single bytes passed the check")
	}
	if err := check("o200k_base", &bpe{ranks: ranks, split: splitCl100k}); err == nil {
		t.Fatal("cl100k's split passed the check for o200k")
	}
	if err := check("o200k_base", &bpe{ranks: ranks, split: splitO200k}); err != nil {
		t.Fatal(err)
	}
}

func specsRanks(t *testing.T, enc string) map[string]int {
	_, _, tok := references(t)
	b, err := tok.encoding(enc)
	if err != nil {
		t.Fatal(err)
	}
	return b.ranks
}

func BenchmarkCountLongRun(b *testing.B) {
	tok := New()
	text := strings.Repeat("a", 1<<20)
	tok.Count("o200k_base", text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Count("o200k_base", text)
	}
}

// BenchmarkReference60Words is tiktoken-go on BenchmarkCount60Words' text,
// for the ratio.
func BenchmarkReference60Words(b *testing.B) {
	encs, _, _ := references(b)
	text := strings.Repeat("the quick brown fox jumps over the lazy dog near /srv/app/main.go ", 5)
	b.ReportAllocs()
	for b.Loop() {
		encs["o200k_base"].EncodeOrdinary(text)
	}
}

// The split agrees with regexp2 and the count with tiktoken-go on any text
// small enough for tiktoken-go's quadratic merge.
func FuzzSplit(f *testing.F) {
	for _, s := range append(selfCheck, "hello world", strings.Repeat("a", 300), strings.Repeat("!?", 200)+"x",
		"\xff\xfe", strings.Repeat(" \n", 150), "x'LL y'ſ z'İ", "\u0301\u0301a", " \u00a0\n") {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, text string, cl100k bool) {
		if len(text) > 1024 {
			return // tiktoken-go is quadratic in a piece's length
		}
		enc := "o200k_base"
		if cl100k {
			enc = "cl100k_base"
		}
		checkSplit(t, enc, text)
		checkCount(t, enc, text)
	})
}

// Counts from the cache of merged pieces equal tiktoken-go's: enough made-up
// words that many share a slot (about 2,000 of 8,192 in 16,384 slots), counted
// twice (the second time from the cache where a word kept its slot).
func TestCountCachedPiecesMatchTiktoken(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	syll := []string{"ka", "lo", "mi", "ten", "ra", "dus", "po", "ve", "shi", "an", "gor", "bel", "tri", "mon", "sa", "X", "9"}
	var b strings.Builder
	for range pieceSlots / 2 {
		b.WriteByte(' ')
		for range 2 + rng.IntN(4) {
			b.WriteString(syll[rng.IntN(len(syll))])
		}
	}
	text := b.String()
	for enc := range specs {
		for range 2 {
			checkCount(t, enc, text)
		}
	}
}
