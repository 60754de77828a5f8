package main

import (
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
)

// BenchmarkCompact100kTokens compacts a session whose window holds ~100k
// tokens (of a 128k window) with the extractive summarizer, through the API.
//
//	go test -run '^$' -bench Compact100kTokens -benchtime 3x ./cmd/ctxd/
func BenchmarkCompact100kTokens(b *testing.B) {
	ts := startServer(b, b.TempDir())
	corpus := memorytest.ZipfCorpus(2000, 2)
	var took, before, after float64
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		session := "c" + string(rune('a'+i%26))
		ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 1_000_000})
		tokens := 0
		for j := 0; tokens < 100_000; j += 100 {
			var batch []map[string]any
			for k := j; k < j+100; k++ {
				batch = append(batch, msg([]string{"user", "assistant"}[k%2], corpus[k%len(corpus)]))
			}
			body := ts.mustDo(201, "POST", "/v1/sessions/"+session+"/messages", map[string]any{"messages": batch})
			tokens = int(body["session"].(map[string]any)["tokens"].(float64))
		}
		ts.mustDo(200, "PUT", "/v1/sessions/"+session, map[string]any{"context_window": 128000})
		b.StartTimer()
		start := time.Now()
		rep := ts.mustDo(200, "POST", "/v1/sessions/"+session+"/compact", map[string]any{})
		took += time.Since(start).Seconds()
		before += rep["tokens_before"].(float64)
		after += rep["tokens_after"].(float64)
	}
	b.ReportMetric(took/float64(b.N)*1000, "ms/compaction")
	b.ReportMetric(before/float64(b.N), "tokens-before")
	b.ReportMetric(after/float64(b.N), "tokens-after")
}
