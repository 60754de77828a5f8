package main

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestBenchSmallRun runs the whole bench against an in-process server:
// ingest, restart, mixed load; nothing may fail and every operation must
// have been measured.
func TestBenchSmallRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a server under load for a few seconds")
	}
	o := benchDefaults()
	o.Messages, o.Sessions, o.Clients, o.Duration = 500, 5, 2, 2*time.Second
	// Even weights: with the default 10% writes, a slow -race run of a few
	// dozen operations could draw no write at all.
	o.Mix = "search_all=1,search_session=1,context=1,write=1"
	o.Startup, o.StartupExec = true, false
	o.Timeout = 2 * time.Minute
	var log bytes.Buffer
	rep, err := runBench(context.Background(), o, &log)
	if err != nil {
		t.Fatalf("runBench: %v\nlog:\n%s", err, log.String())
	}
	if rep.Errors != 0 {
		t.Fatalf("%d errors: %v", rep.Errors, rep.ErrorSamples)
	}

	in := rep.Ingest
	if in == nil || in.Messages != 500 || in.Batch.Count != 5 || in.MessagesPerSec <= 0 || in.Errors != 0 || in.Compactions != 0 {
		t.Fatalf("ingest: %+v", in)
	}
	checkBenchLat(t, "ingest batch", in.Batch)
	if c := rep.Corpus; c.Messages != 500 || c.ToolOutputs == 0 || c.ToolCalls != c.ToolOutputs || c.Chat+c.ToolCalls+c.ToolOutputs != 500 {
		t.Errorf("corpus: %+v", c)
	}
	if s := rep.Startup; s == nil || s.InProcessSeconds <= 0 {
		t.Errorf("startup: %+v", s)
	}

	m := rep.Mixed
	if m == nil {
		t.Fatal("no mixed load")
	}
	for _, op := range benchOps {
		l, ok := m.Ops[op]
		if !ok || l.Count == 0 || l.PerSec <= 0 || l.Errors != 0 {
			t.Errorf("%s: %+v", op, l)
			continue
		}
		checkBenchLat(t, op, l)
	}
	if m.Seconds < 2 || m.Seconds > 30 {
		t.Errorf("mixed load ran %.2fs for a duration of 2s", m.Seconds)
	}

	if mem := rep.Memory; mem == nil || mem.RSSEnd <= 0 || mem.HWM < mem.RSSEnd {
		t.Errorf("memory: %+v", mem)
	}
	if d := rep.Disk; d == nil || d.Total <= 0 || d.Parts["ctxd.db"] <= 0 {
		t.Errorf("data dir: %+v", d)
	}

	var text, js bytes.Buffer
	if err := rep.writeText(&text); err != nil || !strings.Contains(text.String(), "errors: none") {
		t.Errorf("text report (%v):\n%s", err, text.String())
	}
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not parse: %v", err)
	}
	if ops, _ := back["mixed"].(map[string]any)["ops"].(map[string]any); len(ops) != len(benchOps)+1 || ops[benchOpAll] == nil { // and "all"
		t.Errorf("JSON report ops: %v", back["mixed"])
	}
}

func checkBenchLat(t *testing.T, what string, l benchLat) {
	t.Helper()
	if !(0 < l.P50 && l.P50 <= l.P95 && l.P95 <= l.P99 && l.P99 <= l.Max) {
		t.Errorf("%s: percentiles out of order or zero: %+v", what, l)
	}
}

func TestBenchCorpusDeterministic(t *testing.T) {
	t.Parallel()
	mk := func(seed uint64) *benchCorpus {
		return newBenchCorpus(benchCorpus{Seed: seed, Messages: 1050, Sessions: 7, Batch: 100, ToolShare: 0.10,
			WordsMin: 10, WordsMax: 80, Prefix: "bench-"})
	}
	a, b, other := mk(42), mk(42), mk(43)
	if a.batches() != 11 || len(a.batch(10)) != 50 || a.batch(11) != nil {
		t.Fatalf("batches: %d, last %d", a.batches(), len(a.batch(10)))
	}
	if !reflect.DeepEqual(a.batch(3), b.batch(3)) {
		t.Error("same seed, different batch")
	}
	if reflect.DeepEqual(a.batch(3), other.batch(3)) {
		t.Error("different seeds, same batch")
	}
	if a.sessionOf(3) != "bench-00003" || a.sessionOf(10) != "bench-00003" {
		t.Errorf("sessions: %s %s", a.sessionOf(3), a.sessionOf(10))
	}
	var s benchCorpusStats
	for i := range a.batches() {
		msgs := a.batch(i)
		s.add(msgs)
		for j, m := range msgs {
			switch {
			case m.Role == "tool":
				if j == 0 || len(msgs[j-1].ToolCalls) != 1 || msgs[j-1].ToolCalls[0].ID != m.ToolCallID {
					t.Fatalf("batch %d message %d: tool output without its call", i, j)
				}
				if len(m.Content) < 1024 || len(m.Content) > 8*1024+300 {
					t.Errorf("tool output of %d bytes", len(m.Content))
				}
			case len(m.ToolCalls) > 0:
				if j+1 >= len(msgs) || msgs[j+1].Role != "tool" {
					t.Fatalf("batch %d message %d: tool call without its output", i, j)
				}
			default:
				if n := len(strings.Fields(m.Content)); n < 10 || n > 80 {
					t.Errorf("chat turn of %d words", n)
				}
			}
		}
	}
	s.finish()
	if share := float64(s.ToolOutputs) / float64(s.Messages); share < 0.06 || share > 0.14 {
		t.Errorf("tool output share %.3f, want about 0.10", share)
	}
	if s.WordsPerChat < 35 || s.WordsPerChat > 55 {
		t.Errorf("%.1f words per chat turn, want about 45", s.WordsPerChat)
	}
	plain := newBenchCorpus(benchCorpus{Seed: 1, Messages: 1000, Sessions: 1, Batch: 100, WordsMin: 5, WordsMax: 5, Prefix: "p-"})
	for i := range plain.batches() {
		for _, m := range plain.batch(i) {
			if m.Role == "tool" || len(m.ToolCalls) > 0 {
				t.Fatal("tool share 0 produced a tool call")
			}
		}
	}
}

func TestBenchRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:8080", "http://127.9.9.9:1", "http://[::1]:8080/", "https://localhost:443"} {
		if _, err := benchLoopbackURL(ctx, "server", u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"http://10.0.0.1:8080", "http://example.com", "http://0.0.0.0:8080", "ftp://127.0.0.1",
		"127.0.0.1:8080", "http://user:pw@127.0.0.1:8080", "http://127.0.0.1:8080/v1", "http://[::]:80"} {
		if _, err := benchLoopbackURL(ctx, "server", u); err == nil {
			t.Errorf("%s: accepted", u)
		}
	}
	o := benchDefaults()
	o.Server = "http://192.0.2.1:8080"
	if _, err := runBench(ctx, o, nil); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("runBench with a non-loopback server: %v", err)
	}
}

func TestBenchOptions(t *testing.T) {
	t.Parallel()
	bad := []func(*benchOptions){
		func(o *benchOptions) { o.Batch = 1001 },
		func(o *benchOptions) { o.ToolShare = 0.6 },
		func(o *benchOptions) { o.Mix = "search_all=0" },
		func(o *benchOptions) { o.Mix = "delete=1" },
		func(o *benchOptions) { o.Server, o.Startup = "http://127.0.0.1:1", true },
		func(o *benchOptions) { o.ServerPID = 1 },
		func(o *benchOptions) { o.Prefix = "a/b" },
		func(o *benchOptions) { o.Mode = "fuzzy" },
		func(o *benchOptions) { o.SkipIngest = true },
	}
	for i, f := range bad {
		o := benchDefaults()
		f(&o)
		if err := o.validate(); err == nil {
			t.Errorf("case %d: accepted", i)
		}
	}
	if o := benchDefaults(); o.validate() != nil {
		t.Errorf("defaults: %v", o.validate())
	}
	if lo, hi, err := benchParseRange("40-80"); err != nil || lo != 40 || hi != 80 {
		t.Errorf("40-80: %d %d %v", lo, hi, err)
	}
	if _, _, err := benchParseRange("80-40"); err == nil {
		t.Error("80-40 accepted")
	}
}
