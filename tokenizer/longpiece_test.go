package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// The heap merge counts exactly what tiktoken-go's EncodeOrdinary returns,
// on text with and without long runs (short enough for tiktoken-go's
// quadratic merge to finish).
func TestHeapBPEMatchesTiktoken(t *testing.T) {
	tok := New()
	rng := rand.New(rand.NewPCG(7, 7))
	alphabet := []string{"a", "b", "e", "Z", "é", "ß", "日本", "!", "-", "=", "/", " ", "\n", "\r\n", "\t", "7", "42", "'s", "😀", "\u0301"}
	var texts []string
	for range 300 {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			if rng.IntN(3) == 0 {
				b.WriteString(strings.Repeat(alphabet[rng.IntN(len(alphabet))], 1+rng.IntN(1500)))
			} else {
				for range 1 + rng.IntN(40) {
					b.WriteString(alphabet[rng.IntN(len(alphabet))])
				}
			}
		}
		texts = append(texts, b.String())
	}
	texts = append(texts, strings.Repeat("a", 3000), strings.Repeat("ab", 2000), strings.Repeat("!", 2500),
		strings.Repeat(" ", 2000)+"x", "The quick brown fox "+strings.Repeat("jumps", 400)+" over the lazy dog.",
		strings.Repeat("\n", 1000), strings.Repeat("AbC", 700), strings.Repeat("Ω", 900))
	for _, enc := range []string{"o200k_base", "cl100k_base"} {
		e, err := tok.encoding(enc)
		if err != nil {
			t.Fatal(err)
		}
		h, err := tok.heap(enc)
		if err != nil {
			t.Fatal(err)
		}
		long := 0
		for _, text := range texts {
			want := len(e.EncodeOrdinary(text))
			got, err := h.count(text)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%s: heap merge counts %d, tiktoken-go %d, for %q", enc, got, want, text[:min(len(text), 80)])
			}
			if hasLongRun(text) {
				long++
			}
		}
		if long < 50 {
			t.Fatalf("only %d texts with long runs: the comparison does not exercise the heap path", long)
		}
	}
}

// A 1 MiB run of one letter, within the content limit, is counted (it took
// tiktoken-go hours); the count grows with the text, as tokens do.
func TestLongRunIsCounted(t *testing.T) {
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

func BenchmarkCountLongRun(b *testing.B) {
	tok := New()
	text := strings.Repeat("a", 1<<20)
	tok.Count("o200k_base", text)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.Count("o200k_base", text)
	}
}

// The heap merge agrees with tiktoken-go on any text small enough for
// tiktoken-go to count quickly.
func FuzzHeapBPE(f *testing.F) {
	tok := New()
	for _, s := range []string{"hello world", strings.Repeat("a", 300), strings.Repeat("!?", 200) + "x", "\xff\xfe", strings.Repeat(" \n", 150)} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, text string, cl100k bool) {
		// tiktoken-go, the reference, is quadratic in a piece's length: at
		// 4 KiB one input could outlast a short -fuzztime, which Go reports
		// as a failure ("context deadline exceeded"). 1 KiB still passes the
		// 256-byte run that switches to the heap merge.
		if len(text) > 1024 {
			return
		}
		enc := "o200k_base"
		if cl100k {
			enc = "cl100k_base"
		}
		e, _ := tok.encoding(enc)
		h, err := tok.heap(enc)
		if err != nil {
			t.Fatal(err)
		}
		got, err := h.count(text)
		if err != nil {
			t.Fatal(err)
		}
		if want := len(e.EncodeOrdinary(text)); got != want {
			t.Fatalf("%s: heap merge counts %d, tiktoken-go %d, for %q", enc, got, want, text)
		}
	})
}
