package httpapi

import (
	"net/http"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
	"github.com/labstack/echo/v4"
)

// adminKey marks, in the echo context, a request made with an admin key.
const adminKey = "ctxd.admin"

// DefaultExportStall is how long one write of a streamed export may wait for
// a client that does not read, when the server has no WriteTimeout: the
// export holds a store snapshot open, which keeps the store file from
// reusing freed pages, so a stalled client must not keep it forever.
const DefaultExportStall = time.Minute

// export streams GET /v1/export: the format of `ctxd export`, from one
// snapshot of the store, as it is read (chunked, never whole in memory).
// A key exports its own tenant; an admin key may name any (?tenant=), or
// with ?all and no tenant, every tenant. A failure before the first byte is
// the usual JSON error; after it, the status is sent, so the body ends in a
// trailer marked incomplete and the connection is cut before the chunked
// body's end: either way the reader sees it is short.
func (s *Server) export(c echo.Context) error {
	o, err := s.exportOptions(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	w := &exportWriter{c: c, rc: http.NewResponseController(c.Response()), stall: s.opts.WriteTimeout}
	if w.stall <= 0 {
		w.stall = DefaultExportStall
		// net/http sets a connection's write deadline per request only
		// when it has a WriteTimeout: without one, the export's last
		// deadline would outlive it and fail a later request on the same
		// kept-alive connection.
		defer func() { _ = w.rc.SetWriteDeadline(time.Time{}) }()
	}
	rep, err := admin.ExportLive(ctx, s.svc, w, o)
	if err == nil {
		return nil
	}
	if !c.Response().Committed {
		return err
	}
	s.opts.Logger.Error("export failed after it began; the connection is cut", "err", err,
		"sessions", rep.Sessions, "messages", rep.Messages, "tenant", memory.TenantFromContext(ctx),
		"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	// net/http closes the connection without the chunked body's last
	// chunk, so even a reader that ignores the trailer gets an error.
	panic(http.ErrAbortHandler)
}

func (s *Server) exportOptions(c echo.Context) (admin.ExportOptions, error) {
	o := admin.ExportOptions{Session: c.QueryParam("session")}
	var err error
	if o.All, err = queryBool(c, "all"); err != nil {
		return o, err
	}
	if o.Vectors, err = queryBool(c, "vectors"); err != nil {
		return o, err
	}
	if (o.Session == "") == !o.All {
		return o, memory.Errorf(memory.EINVALID, "give one of session=ID or all=true")
	}
	if o.Session != "" {
		if err := memory.ValidateSessionID(o.Session); err != nil {
			return o, err
		}
	}
	tenant := memory.TenantFromContext(c.Request().Context())
	admin, _ := c.Get(adminKey).(bool)
	asked := c.QueryParam("tenant")
	switch {
	case asked != "" && !tenantName.MatchString(asked):
		return o, memory.Errorf(memory.EINVALID, "tenant: %q is not a valid tenant name", asked)
	case asked != "" && asked != tenant && !admin:
		return o, memory.Errorf(memory.EFORBIDDEN, "this key exports only its own tenant; an admin key may export %q", asked)
	case asked != "":
		o.Tenant = asked
	case admin && o.All && c.Request().Header.Get(TenantHeader) == "":
		o.Tenant = "" // every tenant
	default:
		o.Tenant = tenant
	}
	return o, nil
}

// exportWriter sends each block of the export as it comes: the status and
// headers with the first, then a flush per block, so the client receives
// the export while it is read, and each write gets its own deadline.
type exportWriter struct {
	c     echo.Context
	rc    *http.ResponseController
	stall time.Duration
}

func (w *exportWriter) Write(p []byte) (int, error) {
	r := w.c.Response()
	if !r.Committed {
		r.Header().Set(echo.HeaderContentType, "application/x-ndjson")
		r.WriteHeader(http.StatusOK)
	}
	// Not every writer supports deadlines (a test's recorder): then the
	// server's own timeouts are all there is.
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.stall))
	n, err := r.Write(p)
	if err != nil {
		return n, err
	}
	if err := w.rc.Flush(); err != nil {
		return n, err
	}
	return n, nil
}
