package summarize

import (
	"context"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// BenchmarkExtractive summarizes 50 messages of ~60 words to 500 tokens.
func BenchmarkExtractive(b *testing.B) {
	for _, c := range []struct {
		name string
		emb  bool
	}{{"glove", true}, {"terms", false}} {
		b.Run(c.name, func(b *testing.B) {
			e := extractive(b, c.emb)
			req := memory.SummaryRequest{Messages: benchMessages(50), TargetTokens: 500, Encoding: enc, Prompt: "why are the index tests slow"}
			if _, err := e.Summarize(context.Background(), req); err != nil { // warm the tokenizer
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if _, err := e.Summarize(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
