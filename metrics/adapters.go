package metrics

import (
	"context"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/prometheus/client_golang/prometheus"
)

type summarizerMetrics struct {
	duration  *prometheus.HistogramVec
	errors    prometheus.Counter
	fallbacks prometheus.Counter
}

func newSummarizerMetrics(reg prometheus.Registerer) summarizerMetrics {
	s := summarizerMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "summarizer",
			Name: "duration_seconds", Help: "Time to write one summary, by the method that wrote it (extractive, llm, annotation; error if none did).",
			Buckets: latencyBuckets}, []string{"method"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "summarizer",
			Name: "errors_total", Help: "Summaries that failed."}),
		fallbacks: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "summarizer",
			Name: "fallbacks_total", Help: "Summaries written by a fallback method (the LLM failed or was over budget)."}),
	}
	reg.MustRegister(s.duration, s.errors, s.fallbacks)
	return s
}

// Summarizer times s. memory type-asserts no optional interface on a
// Summarizer, so the decorator has only Summarize to pass through.
func (m *Metrics) Summarizer(s memory.Summarizer) memory.Summarizer {
	if m == nil || s == nil {
		return s
	}
	return &summarizer{next: s, m: &m.summ}
}

type summarizer struct {
	next memory.Summarizer
	m    *summarizerMetrics
}

func (s *summarizer) Summarize(ctx context.Context, req memory.SummaryRequest) (memory.Summary, error) {
	start := time.Now()
	sum, err := s.next.Summarize(ctx, req)
	method := oneOf(sum.Method, memory.SummaryExtractive, memory.SummaryLLM, memory.SummaryAnnotation)
	if err != nil {
		method = "error"
		s.m.errors.Inc()
	} else if sum.Note != "" {
		s.m.fallbacks.Inc()
	}
	s.m.duration.WithLabelValues(method).Observe(time.Since(start).Seconds())
	return sum, err
}

type embedderMetrics struct {
	duration prometheus.Histogram
	errors   prometheus.Counter
	texts    prometheus.Counter
}

func newEmbedderMetrics(reg prometheus.Registerer) embedderMetrics {
	e := embedderMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "embedder",
			Name: "duration_seconds", Help: "Time of one embedding call (one batch of texts).", Buckets: latencyBuckets}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "embedder",
			Name: "errors_total", Help: "Embedding calls that failed."}),
		texts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: "embedder",
			Name: "texts_total", Help: "Texts embedded successfully."}),
	}
	reg.MustRegister(e.duration, e.errors, e.texts)
	return e
}

// Embedder times e's Embed calls and passes Model and Dim through; memory
// type-asserts no optional interface on an Embedder.
func (m *Metrics) Embedder(e memory.Embedder) memory.Embedder {
	if m == nil || e == nil {
		return e
	}
	return &embedder{next: e, m: &m.embed}
}

type embedder struct {
	next memory.Embedder
	m    *embedderMetrics
}

func (e *embedder) Model() string { return e.next.Model() }
func (e *embedder) Dim() int      { return e.next.Dim() }

func (e *embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	start := time.Now()
	vecs, err := e.next.Embed(ctx, texts)
	e.m.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		e.m.errors.Inc()
		return vecs, err
	}
	e.m.texts.Add(float64(len(texts)))
	return vecs, nil
}
