package metrics

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"
)

// RouteUnmatched is the route label of requests no route matched.
const RouteUnmatched = "unmatched"

type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newHTTPMetrics(reg prometheus.Registerer) httpMetrics {
	labels := []string{"route", "method", "code"}
	h := httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "http",
			Name: "requests_total", Help: "HTTP requests answered, by route pattern, method and status code."}, labels),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "http",
			Name: "request_duration_seconds", Help: "Time to answer an HTTP request, by route pattern, method and status code.",
			Buckets: latencyBuckets}, labels),
	}
	reg.MustRegister(h.requests, h.duration)
	return h
}

// Instrument counts and times every request e answers. It is a
// pre-middleware, outside everything else (logging, recovery, auth), so it
// sees the status the client got, errors and rejections included. The route
// label is the route's pattern (/v1/sessions/:id), never the URL, so session
// ids do not become label values.
func (m *Metrics) Instrument(e *echo.Echo) {
	routes := &routeSet{e: e}
	e.Pre(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil && !c.Response().Committed {
				// Let the server's error handler write the answer now, so
				// its status is the one counted; echo does not call it again
				// on a committed response.
				c.Error(err)
			}
			route := c.Path()
			if errors.Is(err, echo.ErrNotFound) || !routes.has(route) {
				route = RouteUnmatched
			}
			labels := prometheus.Labels{"route": route, "method": methodLabel(c.Request().Method),
				"code": strconv.Itoa(c.Response().Status)}
			m.http.requests.With(labels).Inc()
			m.http.duration.With(labels).Observe(time.Since(start).Seconds())
			return err
		}
	})
}

// methodLabel bounds the method label: a client may send any token as a
// method.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return method
	}
	return "other"
}

// routeSet knows the registered route patterns. On a miss echo may still
// have set a path (the nearest node of its tree) and routes can be added
// after Instrument, so a miss rereads the routes when their number changed.
type routeSet struct {
	e     *echo.Echo
	mu    sync.RWMutex
	known map[string]bool
	n     int
}

func (s *routeSet) has(path string) bool {
	if path == "" {
		return false
	}
	s.mu.RLock()
	ok, n := s.known[path], s.n
	s.mu.RUnlock()
	if ok {
		return true
	}
	routes := s.e.Routes()
	if len(routes) == n {
		return false
	}
	known := make(map[string]bool, len(routes))
	for _, r := range routes {
		known[r.Path] = true
	}
	s.mu.Lock()
	s.known, s.n = known, len(routes)
	s.mu.Unlock()
	return known[path]
}
