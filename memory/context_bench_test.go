package memory_test

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// BenchmarkContextBySessionLength asks, in one run, for the windows of a
// session of 1,000 messages and of one of 10,000 (a 16,000-token context
// window: both compacted, the longer one with ten times the cold history),
// alternating, with prompts about old turns so that cold originals come
// back. A call's work must be bounded by the window it builds, not by the
// session's history: the ratio of the two sessions' medians is the figure
// (goal: <= 1.5). Alternating calls share whatever load the machine has.
// CPU per call is the process's (the call and the background work it
// starts), steadier than wall time on a shared machine.
//
//	go test -run '^$' -bench ContextBySessionLength -benchtime 200x ./memory/
func BenchmarkContextBySessionLength(b *testing.B) {
	h := memorytest.Open(b)
	ctx := context.Background()
	sizes := []int{1_000, 10_000}
	corpus := map[int][]string{}
	for _, n := range sizes {
		id := fmt.Sprintf("s%d", n)
		window := 16_000
		if _, err := h.PutSession(ctx, id, memory.SessionUpdate{ContextWindow: &window}); err != nil {
			b.Fatal(err)
		}
		corpus[n] = memorytest.ZipfCorpus(n, int64(n))
		for i := 0; i < n; i += 100 {
			var batch []*memory.Message
			for j := i; j < i+100; j++ {
				batch = append(batch, &memory.Message{Role: []memory.Role{memory.RoleUser, memory.RoleAssistant}[j%2], Content: corpus[n][j]})
			}
			if _, err := h.Append(ctx, id, batch); err != nil {
				b.Fatal(err)
			}
		}
		if err := h.Wait(ctx); err != nil {
			b.Fatal(err)
		}
		sess, err := h.Store.Session(ctx, memory.DefaultTenant, id)
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: %d messages, %d active, %d dropped, %d summarized", id, n, sess.Counts.Active, sess.Counts.Dropped, sess.Counts.Summarized)
	}
	wall := map[int][]time.Duration{}
	cpu := map[int]time.Duration{}
	i := 0
	for b.Loop() {
		for _, n := range sizes {
			// A question about an old turn: a few of its words.
			words := strings.Fields(corpus[n][(i*7919)%(n/2)])
			prompt := "what about " + strings.Join(words[:min(6, len(words))], " ") + "?"
			c0, t0 := processCPU(), time.Now()
			// Labelled by session length: with -cpuprofile, pprof's
			// -tagfocus size=10000 shows one length's calls alone.
			pprof.Do(ctx, pprof.Labels("size", strconv.Itoa(n)), func(ctx context.Context) {
				if _, err := h.Context(ctx, fmt.Sprintf("s%d", n), memory.ContextRequest{Prompt: prompt, MaxTokens: 8000}); err != nil {
					b.Fatal(err)
				}
				if err := h.Wait(ctx); err != nil { // background work a call started is its cost
					b.Fatal(err)
				}
			})
			wall[n] = append(wall[n], time.Since(t0))
			cpu[n] += processCPU() - c0
		}
		i++
	}
	med := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	for _, n := range sizes {
		b.ReportMetric(med(wall[n]), fmt.Sprintf("p50-ms-%d", n))
		b.ReportMetric(float64(cpu[n].Microseconds())/1000/float64(i), fmt.Sprintf("cpu-ms-%d", n))
	}
	b.ReportMetric(med(wall[10_000])/med(wall[1_000]), "p50-ratio")
	b.ReportMetric(float64(cpu[10_000])/float64(cpu[1_000]), "cpu-ratio")
}

// processCPU is the user and system CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
