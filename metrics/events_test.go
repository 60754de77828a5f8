package metrics_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/eventlog"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/metrics"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestEventLogCountsAndPassesThrough(t *testing.T) {
	dir := t.TempDir()
	inner, err := eventlog.Open(dir, eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inner.Close() })
	m := metrics.New(nil)
	log := m.EventLog(inner)

	// Events as memory logs them: Go values, before any JSON.
	events := []struct {
		stream string
		ev     map[string]any
	}{
		{"compaction", map[string]any{"session": "s", "trigger": memory.TriggerAuto, "tokens_before": 1900, "tokens_after": 700,
			"dropped": 2, "summarized": 3, "summaries": []string{"sum1"}}},
		{"compaction", map[string]any{"session": "s", "trigger": memory.TriggerManual, "tokens_before": 800, "tokens_after": 600,
			"dropped": 0, "summarized": 0, "summaries": []string{}}},
		{"compaction", map[string]any{"trigger": "something-new", "summaries": []string{"a", "b"}}},
		{"drops", map[string]any{"chunk": "m1", "reason": memory.ReasonLowRelevance}},
		{"drops", map[string]any{"chunk": "m2", "reason": memory.ReasonBudget}},
		{"drops", map[string]any{"chunk": "m3", "reason": memory.ReasonSummarized}},
		{"drops", map[string]any{"chunk": "m4", "reason": memory.ReasonSummarized}},
		{"recoveries", map[string]any{"chunk": "m1"}},
		{"recoveries", map[string]any{"chunk": "m4", "answer_only": true}},
		{"purges", map[string]any{"chunk": "m2"}},
		{"purges", map[string]any{"chunk": "m3"}},
		{"context-health", map[string]any{"pct_used": 0.35, "state": "ok"}},
		{"context-health", map[string]any{"pct_used": 0.95, "state": "compaction_due"}},
		{"context-health", map[string]any{"pct_used": 1.2, "state": "over_limit"}},
	}
	for _, e := range events {
		if err := log.Log(e.stream, e.ev); err != nil {
			t.Fatalf("log %s: %v", e.stream, err)
		}
	}
	want := `
# HELP ctxd_compactions_total Compactions that changed a session, by trigger (auto, hard_limit, manual).
# TYPE ctxd_compactions_total counter
ctxd_compactions_total{trigger="auto"} 1
ctxd_compactions_total{trigger="hard_limit"} 0
ctxd_compactions_total{trigger="manual"} 1
ctxd_compactions_total{trigger="other"} 1
# HELP ctxd_compaction_freed_tokens_total Window tokens compactions freed.
# TYPE ctxd_compaction_freed_tokens_total counter
ctxd_compaction_freed_tokens_total 1400
# HELP ctxd_compaction_dropped_messages_total Messages compaction dropped to cold storage, by reason (low_relevance, budget).
# TYPE ctxd_compaction_dropped_messages_total counter
ctxd_compaction_dropped_messages_total{reason="budget"} 1
ctxd_compaction_dropped_messages_total{reason="low_relevance"} 1
# HELP ctxd_compaction_summarized_messages_total Messages compaction replaced by a summary (kept in cold storage).
# TYPE ctxd_compaction_summarized_messages_total counter
ctxd_compaction_summarized_messages_total 2
# HELP ctxd_compaction_summaries_total Summary messages compaction wrote.
# TYPE ctxd_compaction_summaries_total counter
ctxd_compaction_summaries_total 3
# HELP ctxd_recovered_messages_total Cold messages recovered into the window.
# TYPE ctxd_recovered_messages_total counter
ctxd_recovered_messages_total 1
# HELP ctxd_recovered_answer_only_total Cold messages sent in a context window but left cold: the window had no room for them under the compaction trigger.
# TYPE ctxd_recovered_answer_only_total counter
ctxd_recovered_answer_only_total 1
# HELP ctxd_purged_messages_total Cold messages purged for good after recoverable_for_days.
# TYPE ctxd_purged_messages_total counter
ctxd_purged_messages_total 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want),
		"ctxd_compactions_total", "ctxd_compaction_freed_tokens_total", "ctxd_compaction_dropped_messages_total",
		"ctxd_compaction_summarized_messages_total", "ctxd_compaction_summaries_total",
		"ctxd_recovered_messages_total", "ctxd_recovered_answer_only_total", "ctxd_purged_messages_total"); err != nil {
		t.Error(err)
	}
	usage := `
# HELP ctxd_context_window_usage_ratio Share of its context window a session's window uses after each write (after any compaction it triggered).
# TYPE ctxd_context_window_usage_ratio histogram
ctxd_context_window_usage_ratio_bucket{le="0.1"} 0
ctxd_context_window_usage_ratio_bucket{le="0.2"} 0
ctxd_context_window_usage_ratio_bucket{le="0.3"} 0
ctxd_context_window_usage_ratio_bucket{le="0.4"} 1
ctxd_context_window_usage_ratio_bucket{le="0.5"} 1
ctxd_context_window_usage_ratio_bucket{le="0.6"} 1
ctxd_context_window_usage_ratio_bucket{le="0.7"} 1
ctxd_context_window_usage_ratio_bucket{le="0.8"} 1
ctxd_context_window_usage_ratio_bucket{le="0.85"} 1
ctxd_context_window_usage_ratio_bucket{le="0.9"} 1
ctxd_context_window_usage_ratio_bucket{le="0.95"} 2
ctxd_context_window_usage_ratio_bucket{le="1"} 2
ctxd_context_window_usage_ratio_bucket{le="+Inf"} 3
ctxd_context_window_usage_ratio_sum 2.5
ctxd_context_window_usage_ratio_count 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(usage), "ctxd_context_window_usage_ratio"); err != nil {
		t.Error(err)
	}

	// Every event reached the wrapped log.
	if err := inner.Close(); err != nil {
		t.Fatal(err)
	}
	for stream, n := range map[string]int{"compaction": 3, "drops": 4, "recoveries": 2, "purges": 2, "context-health": 3} {
		raw, err := os.ReadFile(filepath.Join(dir, stream+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Count(string(raw), "\n"); got != n {
			t.Errorf("%s.jsonl has %d lines, want %d", stream, got, n)
		}
	}
	// The wrapped log's errors come back unchanged.
	if err := log.Log("drops", map[string]any{"reason": memory.ReasonBudget}); err != eventlog.ErrClosed {
		t.Errorf("log after close = %v, want %v", err, eventlog.ErrClosed)
	}
}

func TestNilMetricsPassesThrough(t *testing.T) {
	var m *metrics.Metrics
	inner, err := eventlog.Open(t.TempDir(), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer inner.Close()
	if got := m.EventLog(inner); got != memory.EventLog(inner) {
		t.Errorf("nil Metrics wrapped the event log: %T", got)
	}
	if got := metrics.New(nil).EventLog(nil); got != nil {
		t.Errorf("a nil event log became %T: memory would log into it", got)
	}
}
