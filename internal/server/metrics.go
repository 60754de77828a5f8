package server

import (
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/metrics"
	"github.com/labstack/echo/v4"
)

// instrument sets up Main.Metrics (unless --metrics=false) and returns emb
// timed. It runs before the summarizer is built, so the extractive
// summarizer's own embedding calls are counted too. With metrics off,
// Main.Metrics stays nil and its decorators return what they are given.
func (m *Main) instrument(emb memory.Embedder) memory.Embedder {
	if m.Config.Metrics && m.Metrics == nil {
		m.Metrics = metrics.New(m.Logger)
	}
	return m.Metrics.Embedder(emb)
}

// serveMetrics counts every request and serves GET /metrics on the echo
// root, outside the /v1 group: Prometheus scrapes it without credentials.
// It runs before HTTP serves, as echo's routes are not safe to change while
// it does.
func (m *Main) serveMetrics() {
	if m.Metrics == nil {
		return
	}
	dir := m.Config.DataDir
	m.Metrics.WatchSizes(metrics.Sizes{
		StoreBytes:    metrics.FileBytes(StorePath(dir)),
		IndexBytes:    metrics.DirBytes(IndexPath(dir), 0),
		IndexCounts:   m.Index.Count,
		ColdBytes:     metrics.DirBytes(ColdPath(dir), 0),
		EventLogBytes: metrics.DirBytes(LogsPath(dir), 0),
	})
	e := m.HTTP.Echo()
	m.Metrics.Instrument(e)
	e.GET("/metrics", echo.WrapHandler(m.Metrics.Handler()))
}
