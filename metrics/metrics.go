// Package metrics exposes ctxd's Prometheus metrics: HTTP requests per route,
// what compaction and recovery did (read off the event log), summarizer and
// embedder latency, and the size of what is on disk.
//
// It depends on memory and decorates memory's interfaces; memory knows
// nothing of it, so the domain stays free of Prometheus.
package metrics

import (
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const namespace = "ctxd"

// Metrics is one server's metrics, on a registry of its own (not the global
// one) so that several servers in one process, as in tests, do not collide.
// A nil *Metrics is valid: its decorators return what they are given.
type Metrics struct {
	reg    *prometheus.Registry
	logger *slog.Logger

	http   httpMetrics
	events eventMetrics
	summ   summarizerMetrics
	embed  embedderMetrics
}

// New registers every metric, with Go runtime and process metrics.
func New(logger *slog.Logger) *Metrics {
	if logger == nil {
		logger = slog.Default()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m := &Metrics{reg: reg, logger: logger.With("component", "metrics")}
	m.http = newHTTPMetrics(reg)
	m.events = newEventMetrics(reg)
	m.summ = newSummarizerMetrics(reg)
	m.embed = newEmbedderMetrics(reg)
	return m
}

// Registry is where the metrics are registered, for tests and for adding
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format. A size that
// cannot be read is left out of the answer and logged rather than failing
// the whole scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
		ErrorLog:      errorLog{m.logger},
	})
}

// errorLog adapts slog to promhttp's Println logger.
type errorLog struct{ l *slog.Logger }

func (e errorLog) Println(v ...any) { e.l.Warn("collect metrics", "err", v) }

// latencyBuckets span a fast local call (a GloVe embedding, ~1 ms) to a slow
// remote one (an LLM summary, tens of seconds).
var latencyBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
