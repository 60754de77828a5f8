package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
)

// BenchmarkContext10kCold measures the context call on a session holding
// 10,000 cold messages (the latency goal: p99 <= 30 ms), through the
// HTTP API, with recoveries and the compactions they trigger included.
//
//	go test -run '^$' -bench Context10kCold -benchtime 200x ./cmd/ctxd/
func BenchmarkContext10kCold(b *testing.B) {
	ts := startServer(b, b.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/big", map[string]any{"context_window": 1_000_000})
	const total = 10_000
	corpus := memorytest.ZipfCorpus(total, 1)
	for i := 0; i < total; i += 100 {
		var batch []map[string]any
		for j := i; j < i+100; j++ {
			batch = append(batch, msg([]string{"user", "assistant"}[j%2], corpus[j]))
		}
		ts.store("big", batch...)
	}
	ts.mustDo(200, "PUT", "/v1/sessions/big", map[string]any{"context_window": 16000})
	ts.mustDo(200, "POST", "/v1/sessions/big/compact", map[string]any{})
	st := ts.mustDo(200, "GET", "/v1/sessions/big", nil)["messages"].(map[string]any)
	b.Logf("cold: %v dropped, %v summarized; active %v", st["dropped"], st["summarized"], st["active"])
	var lat []time.Duration
	cpu0 := processCPU()
	if p := os.Getenv("CTXD_BENCH_ALLOCS"); p != "" {
		// Two heap profiles around the calls: pprof -base p.0 p.1 shows
		// what the calls allocated.
		writeHeap(b, p+".0")
		defer writeHeap(b, p+".1")
	}
	if p := os.Getenv("CTXD_BENCH_PROFILE"); p != "" {
		f, _ := os.Create(p)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// A question about an old turn: a few of its words.
		words := strings.Fields(corpus[(i*7919)%total])
		prompt := "what about " + strings.Join(words[:min(6, len(words))], " ") + "?"
		start := time.Now()
		ts.mustDo(200, "POST", "/v1/sessions/big/context", map[string]any{"prompt": prompt, "max_tokens": 8000})
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	// CPU of the whole process (server, background work and this client)
	// per call: on a shared machine, steadier than wall time.
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	if os.Getenv("CTXD_BENCH_TRACE") != "" {
		b.Logf("latencies in call order: %v", lat)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

// BenchmarkContext100kIn1kSessions is the second latency case: a
// server holding 100,000 messages in sessions of 1,000, asked for windows
// of sessions in turn.
//
//	go test -run '^$' -bench Context100kIn1kSessions -benchtime 100x -timeout 30m ./cmd/ctxd/
func BenchmarkContext100kIn1kSessions(b *testing.B) {
	if b.N == 1 {
		// Go's probe run before the -benchtime Nx one: skip its ingest
		// of 100k messages (minutes).
		return
	}
	ts := startServer(b, b.TempDir())
	const sessions, per = 100, 1000
	corpus := memorytest.ZipfCorpus(sessions*per, 2)
	for s := 0; s < sessions; s++ {
		id := fmt.Sprintf("s%03d", s)
		ts.mustDo(200, "PUT", "/v1/sessions/"+id, map[string]any{"context_window": 1_000_000})
		for i := 0; i < per; i += 500 {
			var batch []map[string]any
			for j := i; j < i+500; j++ {
				batch = append(batch, msg([]string{"user", "assistant"}[j%2], corpus[s*per+j]))
			}
			ts.store(id, batch...)
		}
		ts.mustDo(200, "PUT", "/v1/sessions/"+id, map[string]any{"context_window": 16000})
		ts.mustDo(200, "POST", "/v1/sessions/"+id+"/compact", map[string]any{})
	}
	var lat []time.Duration
	cpu0 := processCPU()
	if p := os.Getenv("CTXD_BENCH_PROFILE"); p != "" {
		f, _ := os.Create(p)
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := (i * 37) % sessions
		words := strings.Fields(corpus[s*per+(i*7919)%per])
		prompt := "what about " + strings.Join(words[:min(6, len(words))], " ") + "?"
		start := time.Now()
		ts.mustDo(200, "POST", fmt.Sprintf("/v1/sessions/s%03d/context", s), map[string]any{"prompt": prompt, "max_tokens": 8000})
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
	if os.Getenv("CTXD_BENCH_TRACE") != "" {
		b.Logf("latencies in call order: %v", lat)
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}

func writeHeap(b *testing.B, path string) {
	// The allocs profile is as of the last GC: collect first, so that the
	// setup's allocations do not show up as the calls'.
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
