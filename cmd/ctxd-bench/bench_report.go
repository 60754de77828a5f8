package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

func (r *benchReport) writeJSON(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

func (r *benchReport) cpuNote() string {
	if r.Options.Server == "" {
		return " (in-process: with the load generator)"
	}
	return ""
}

func (r *benchReport) writeText(w io.Writer) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.Options
	var b strings.Builder
	fmt.Fprintf(&b, "ctxd-bench bench: server %s\n", r.Server)
	fmt.Fprintf(&b, "  seed %d, %d messages, %d sessions, batches of %d, %d clients, words %d-%d, tool share %.2f, search %s k=%d\n",
		o.Seed, o.Messages, o.Sessions, o.Batch, o.Clients, o.WordsMin, o.WordsMax, o.ToolShare, o.Mode, o.K)
	fmt.Fprintf(&b, "  load average (1/5/15 min): start %s", r.LoadAvg["start"])
	if v, ok := r.LoadAvg["after_ingest"]; ok {
		fmt.Fprintf(&b, ", after ingest %s", v)
	}
	if v, ok := r.LoadAvg["end"]; ok {
		fmt.Fprintf(&b, ", end %s", v)
	}
	b.WriteString("\n")
	if c := r.Corpus; c != nil {
		fmt.Fprintf(&b, "corpus: %d messages: %d chat (%.1f words each), %d tool calls, %d tool outputs (%.1f KB each); %.1f MB of content\n",
			c.Messages, c.Chat, c.WordsPerChat, c.ToolCalls, c.ToolOutputs, c.ToolOutputKB, c.ContentMB)
	}
	if in := r.Ingest; in != nil {
		fmt.Fprintf(&b, "ingest: %d messages in %.2fs = %.1f msg/s (%.2f MB/s of requests), context_window %s\n",
			in.Messages, in.Seconds, in.MessagesPerSec, in.MBPerSec, in.Window)
		fmt.Fprintf(&b, "  batch latency: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms, max %.1f ms; %d batches, %d errors, %d compactions; client generation %.2fs\n",
			in.Batch.P50, in.Batch.P95, in.Batch.P99, in.Batch.Max, in.Batch.Count, in.Errors, in.Compactions, in.ClientSeconds)
		if in.CPUSeconds > 0 {
			fmt.Fprintf(&b, "  server CPU: %.2fs, %.1f ms per batch%s\n", in.CPUSeconds, in.CPUMsPerBatch, r.cpuNote())
		}
	}
	if s := r.Startup; s != nil {
		fmt.Fprintf(&b, "startup: shutdown %.3fs; in-process restart to /readyz 200 in %.3fs", s.ShutdownSeconds, s.InProcessSeconds)
		if s.FreshSeconds > 0 {
			fmt.Fprintf(&b, "; fresh process %.3fs using %.2fs of CPU (RSS %.1f MB when ready: anon %.1f, file %.1f)",
				s.FreshSeconds, s.FreshCPUSeconds, s.FreshRSSMB, s.FreshAnonMB, s.FreshFileMB)
		} else if s.FreshNote != "" {
			fmt.Fprintf(&b, "; fresh process %s", s.FreshNote)
		}
		b.WriteString("\n")
	}
	if m := r.Mixed; m != nil {
		fmt.Fprintf(&b, "mixed load: %.1fs, %d clients, mix %s: %.1f ops/s", m.Seconds, m.Clients, o.Mix, m.TotalPerSec)
		if m.EmptySearches > 0 {
			fmt.Fprintf(&b, ", %d searches found nothing", m.EmptySearches)
		}
		if m.CPUSeconds > 0 {
			fmt.Fprintf(&b, "; server CPU %.2fs, %.2f ms per operation%s", m.CPUSeconds, m.CPUMsPerOp, r.cpuNote())
		}
		fmt.Fprintf(&b, "\n  %-15s %8s %8s %9s %9s %9s %9s %7s\n", "op", "count", "ops/s", "p50 ms", "p95 ms", "p99 ms", "max ms", "errors")
		for _, op := range append(benchOps[:len(benchOps):len(benchOps)], benchOpAll) {
			l, ok := m.Ops[op]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "  %-15s %8d %8.1f %9.2f %9.2f %9.2f %9.2f %7d\n", op, l.Count, l.PerSec, l.P50, l.P95, l.P99, l.Max, l.Errors)
		}
	}
	if m := r.Memory; m != nil {
		fmt.Fprintf(&b, "server memory (%s):", m.Source)
		if m.RSSAfterIngest > 0 {
			fmt.Fprintf(&b, " VmRSS %.1f MB after ingest,", m.RSSAfterIngest)
		}
		fmt.Fprintf(&b, " VmRSS %.1f MB at the end (anon %.1f, file %.1f), VmHWM %.1f MB", m.RSSEnd, m.AnonEnd, m.FileEnd, m.HWM)
		if m.GoSys > 0 {
			fmt.Fprintf(&b, "; Go heap live %.1f MB, Go sys %.1f MB", m.GoHeapLive, m.GoSys)
		}
		b.WriteString("\n")
		if m.Note != "" {
			fmt.Fprintf(&b, "  (%s)\n", m.Note)
		}
	}
	if d := r.Disk; d != nil {
		fmt.Fprintf(&b, "data dir: %.1f MB in %s", d.Total, d.Dir)
		var parts []string
		for k, v := range d.Parts {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, v))
		}
		slices.Sort(parts)
		if len(parts) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(parts, ", "))
		}
		b.WriteString("\n")
	}
	if r.Profile != "" {
		fmt.Fprintf(&b, "cpu profile of the mixed load: %s\n", r.Profile)
	}
	if r.Errors == 0 {
		b.WriteString("errors: none\n")
	} else {
		fmt.Fprintf(&b, "errors: %d\n", r.Errors)
		for _, e := range r.ErrorSamples {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
