package tokenizer_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// Reference counts from OpenAI's tiktoken (Python) for the same strings.
func TestCountMatchesReference(t *testing.T) {
	tok := tokenizer.New()
	cases := []struct {
		enc, text string
		want      int
	}{
		{memory.EncodingCL100k, "hello world", 2},
		{memory.EncodingO200k, "hello world", 2},
		{memory.EncodingCL100k, "tiktoken is great!", 6},
		{memory.EncodingCL100k, "", 0},
		// Special-token text is counted as plain text, never interpreted.
		{memory.EncodingCL100k, "<|endoftext|>", 7},
	}
	for _, c := range cases {
		got, err := tok.Count(c.enc, c.text)
		if err != nil {
			t.Fatalf("Count(%s, %q): %v", c.enc, c.text, err)
		}
		if got != c.want {
			t.Errorf("Count(%s, %q) = %d, want %d", c.enc, c.text, got, c.want)
		}
	}
}

func TestUnknownEncoding(t *testing.T) {
	_, err := tokenizer.New().Count("p50k_base", "x")
	if memory.ErrorCode(err) != memory.EINVALID {
		t.Fatalf("err = %v, want %s", err, memory.EINVALID)
	}
}

// JSON tool output is where chars/4 goes most wrong; the exact count differs.
func TestCountIsNotCharsOver4(t *testing.T) {
	text := strings.Repeat(`{"id":12345,"path":"/var/log/app.log","ok":true},`, 40)
	n, err := tokenizer.New().Count(memory.EncodingO200k, text)
	if err != nil {
		t.Fatal(err)
	}
	if approx := len(text) / 4; n == approx {
		t.Fatalf("exact count %d equals chars/4", n)
	}
}

func TestConcurrentCount(t *testing.T) {
	tok := tokenizer.New()
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			enc := memory.EncodingO200k
			if i%2 == 0 {
				enc = memory.EncodingCL100k
			}
			for j := 0; j < 50; j++ {
				if n, err := tok.Count(enc, "hello world"); err != nil || n != 2 {
					t.Errorf("Count = %d, %v", n, err)
					return
				}
			}
		}(i)
	}
	wg.Wait()
}

func BenchmarkCount60Words(b *testing.B) {
	tok := tokenizer.New()
	text := strings.Repeat("the quick brown fox jumps over the lazy dog near /srv/app/main.go ", 5)
	if err := tok.Warm(memory.EncodingO200k); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.Count(memory.EncodingO200k, text); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCountMadeUpWords counts log lines of words outside the
// vocabulary (identifiers, made-up names), which take the merge loop, and
// repeat, as in tool outputs.
func BenchmarkCountMadeUpWords(b *testing.B) {
	tok := tokenizer.New()
	if err := tok.Warm(memory.EncodingO200k); err != nil {
		b.Fatal(err)
	}
	words := []string{"kalomiten", "radusposhi", "anbelgor", "trimonsave", "shikadus", "velopotra", "gormonsaka", "belshiten"}
	var sb strings.Builder
	for i := range 200 {
		fmt.Fprintf(&sb, "2024-05-0%dT10:00:%02d.000Z INFO %s/%s.go:%d %s err=%q\n", 1+i%9, i%60,
			words[i%8], words[(i*3)%8], 10+i, words[(i*5)%8], words[(i*7)%8]+" "+words[(i+1)%8])
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tok.Count(memory.EncodingO200k, text); err != nil {
			b.Fatal(err)
		}
	}
}
