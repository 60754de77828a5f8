package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/mcpserver"
	"github.com/labstack/echo/v4"
)

// mountMCP serves the MCP tools (package mcpserver) at /mcp over the
// streamable HTTP transport, behind the same authentication, rate limit,
// timeout and body limit as the routes of /v1: the tenant of the caller's
// key scopes every tool call. The transport is stateless, so POST is its
// only method; GET (a stream the server would push on) and DELETE (the end
// of a session) answer 405, which the protocol allows.
func (s *Server) mountMCP(mw []echo.MiddlewareFunc) {
	h := mcpserver.NewHTTPHandler(s.svc, mcpserver.HTTPOptions{Logger: s.opts.Logger,
		SearchNeighbors: s.opts.SearchNeighbors, BodyLimit: s.opts.BodyLimit, Authenticated: len(s.opts.Keys) > 0})
	s.e.POST("/mcp", func(c echo.Context) error {
		if err := s.chargeBatch(c); err != nil {
			return err
		}
		w := &heldRefusal{ResponseWriter: c.Response().Writer}
		h.ServeHTTP(w, c.Request())
		if w.status == 0 {
			return nil
		}
		// The SDK refuses a request it cannot take (a wrong Accept or
		// Content-Type, a body that is not JSON-RPC) in plain text; the
		// API answers every refusal in its error shape.
		status := w.status
		if api.CodeOf(status) == "" && status < 500 {
			status = http.StatusBadRequest
		}
		return echo.NewHTTPError(status, "mcp: "+strings.TrimSpace(w.body.String()))
	}, mw...)
}

// chargeBatch charges the rate limit for each call of a JSON-RPC batch
// beyond the first (admit charged that one): one POST of 2,000
// memory_context calls ran them all under a limit of 2 requests/s. A
// batch is refused whole, before any call runs, when the allowance cannot
// cover it. The body, limited already, is read here and handed on as read.
func (s *Server) chargeBatch(c echo.Context) error {
	if s.limiter == nil {
		return nil
	}
	r := c.Request()
	body, err := readBody(r)
	if err != nil {
		return s.bodyError(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '[' {
		return nil
	}
	var calls []json.RawMessage
	if json.Unmarshal(trimmed, &calls) != nil || len(calls) < 2 {
		return nil // the transport answers what is not a batch
	}
	return s.chargeMore(c, len(calls)-1)
}

// heldRefusal passes an answer through, except a plain-text error (a 4xx
// or 5xx that is not JSON) and its body, which it keeps for the caller to
// answer in its own shape. A JSON error is a JSON-RPC error response the
// protocol sends with an HTTP status of its own (an unknown resource is a
// 400 with the error in the body): the client reads it, so it passes.
type heldRefusal struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

// maxRefusal bounds the refusal text kept: the SDK's are one line.
const maxRefusal = 1 << 10

func (w *heldRefusal) WriteHeader(code int) {
	isJSON := strings.HasPrefix(w.Header().Get("Content-Type"), "application/json")
	if code >= 400 && !isJSON && w.status == 0 {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *heldRefusal) Write(b []byte) (int, error) {
	if w.status == 0 {
		return w.ResponseWriter.Write(b)
	}
	w.body.Write(b[:min(len(b), max(maxRefusal-w.body.Len(), 0))])
	return len(b), nil
}

// Flush lets an answer stream through (http.Flusher).
func (w *heldRefusal) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok && w.status == 0 {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController the writer underneath.
func (w *heldRefusal) Unwrap() http.ResponseWriter { return w.ResponseWriter }
