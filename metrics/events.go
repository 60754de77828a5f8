package metrics

import (
	"encoding/json"

	"github.com/ctxd/ctxd/memory"
	"github.com/prometheus/client_golang/prometheus"
)

// Event streams and fields read here, as memory writes them (compact.go,
// cold.go, messages_service.go).
const (
	streamCompaction    = "compaction"     // trigger, tokens_before, tokens_after, summaries
	streamDrops         = "drops"          // reason: one event per message moved cold
	streamRecoveries    = "recoveries"     // one event per recovered message; answer_only: sent, left cold
	streamPurges        = "purges"         // one event per purged message
	streamContextHealth = "context-health" // pct_used after each write
	streamPromptCache   = "prompt-cache"   // input_tokens, cache_read_tokens, cache_write_tokens of a gateway answer
)

type eventMetrics struct {
	compactions *prometheus.CounterVec
	freed       prometheus.Counter
	dropped     *prometheus.CounterVec
	summarized  prometheus.Counter
	summaries   prometheus.Counter
	recovered   prometheus.Counter
	answerOnly  prometheus.Counter
	purged      prometheus.Counter
	usage       prometheus.Histogram
	cache       *promptCache
}

func newEventMetrics(reg prometheus.Registerer) eventMetrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help})
	}
	ev := eventMetrics{
		compactions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "compactions_total",
			Help: "Compactions that changed a session, by trigger (auto, hard_limit, manual)."}, []string{"trigger"}),
		freed: counter("compaction_freed_tokens_total", "Window tokens compactions freed."),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "compaction_dropped_messages_total",
			Help: "Messages compaction dropped to cold storage, by reason (low_relevance, budget)."}, []string{"reason"}),
		summarized: counter("compaction_summarized_messages_total", "Messages compaction replaced by a summary (kept in cold storage)."),
		summaries:  counter("compaction_summaries_total", "Summary messages compaction wrote."),
		recovered:  counter("recovered_messages_total", "Cold messages recovered into the window."),
		answerOnly: counter("recovered_answer_only_total", "Cold messages sent in a context window but left cold: the window had no room for them under the compaction trigger."),
		purged:     counter("purged_messages_total", "Cold messages purged for good after recoverable_for_days."),
		usage: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "context_window_usage_ratio",
			Help:    "Share of its context window a session's window uses after each write (after any compaction it triggered).",
			Buckets: []float64{.1, .2, .3, .4, .5, .6, .7, .8, .85, .9, .95, 1}}),
	}
	reg.MustRegister(ev.compactions, ev.freed, ev.dropped, ev.summarized, ev.summaries, ev.recovered, ev.answerOnly, ev.purged, ev.usage)
	ev.cache = newPromptCache(reg)
	// Known label values start at 0, so a rate over them exists before the
	// first compaction.
	for _, t := range []string{memory.TriggerAuto, memory.TriggerHardLimit, memory.TriggerManual} {
		ev.compactions.WithLabelValues(t)
	}
	for _, r := range []string{memory.ReasonLowRelevance, memory.ReasonBudget} {
		ev.dropped.WithLabelValues(r)
	}
	return ev
}

// EventLog counts what the events of log report, then passes them on. The
// counts are taken whether or not the log manages to write the event: the
// thing happened either way.
func (m *Metrics) EventLog(log memory.EventLog) memory.EventLog {
	if m == nil || log == nil {
		return log
	}
	return &eventLog{next: log, m: &m.events}
}

type eventLog struct {
	next memory.EventLog
	m    *eventMetrics
}

func (l *eventLog) Log(stream string, event map[string]any) error {
	l.m.observe(stream, event)
	return l.next.Log(stream, event)
}

func (m *eventMetrics) observe(stream string, ev map[string]any) {
	switch stream {
	case streamCompaction:
		m.compactions.WithLabelValues(oneOf(ev["trigger"], memory.TriggerAuto, memory.TriggerHardLimit, memory.TriggerManual)).Inc()
		m.summaries.Add(float64(count(ev["summaries"])))
		before, ok1 := number(ev["tokens_before"])
		after, ok2 := number(ev["tokens_after"])
		if ok1 && ok2 && before > after {
			m.freed.Add(before - after)
		}
	case streamDrops:
		if ev["reason"] == memory.ReasonSummarized {
			m.summarized.Inc()
			return
		}
		m.dropped.WithLabelValues(oneOf(ev["reason"], memory.ReasonLowRelevance, memory.ReasonBudget)).Inc()
	case streamRecoveries:
		if ev["answer_only"] == true {
			m.answerOnly.Inc()
			return
		}
		m.recovered.Inc()
	case streamPurges:
		m.purged.Inc()
	case streamContextHealth:
		if pct, ok := number(ev["pct_used"]); ok {
			m.usage.Observe(pct)
		}
	case streamPromptCache:
		m.cache.observe(ev)
	}
}

// oneOf bounds a label to known values: anything else is "other".
func oneOf(v any, known ...string) string {
	s, _ := v.(string)
	for _, k := range known {
		if s == k {
			return s
		}
	}
	return "other"
}

// number reads a numeric event field, whatever Go type it was logged as.
func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case uint64:
		return float64(x), true
	case float64:
		return x, true
	case float32:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// count reads a field that is either a list (of ids) or a number.
func count(v any) int {
	switch x := v.(type) {
	case []string:
		return len(x)
	case []any:
		return len(x)
	}
	n, _ := number(v)
	return int(n)
}
