package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

func errReadTimeout(limit time.Duration) error {
	return memory.Errorf(api.CodeRequestTimeout, "the request body did not arrive within the server's read timeout (--read-timeout %v): send the whole body at once, as declared by Content-Length", limit)
}

// handleError writes every error in API.md's shape, and logs internal ones
// (their detail stays in the log, not in the answer).
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, msg := http.StatusInternalServerError, memory.EINTERNAL, "internal error"
	var he *echo.HTTPError
	var pe *providerError
	switch {
	case errors.As(err, &pe):
		status, code, msg = pe.status, pe.code, pe.msg
	case errors.Is(err, context.DeadlineExceeded) && s.opts.RequestTimeout > 0 &&
		errors.Is(c.Request().Context().Err(), context.DeadlineExceeded):
		// The request's own deadline (not an upstream's shorter one):
		// echo's timeout middleware answers a bare 503; say which limit.
		status, code = http.StatusServiceUnavailable, memory.EUNAVAILABLE
		msg = fmt.Sprintf("the request ran past the server's request timeout (--request-timeout %v) and was stopped; "+
			"send less per call, or retry a write with the same Idempotency-Key or message_id", s.opts.RequestTimeout)
	case errors.As(err, &he):
		status = he.Code
		code = api.CodeOf(status)
		if code == "" {
			code = memory.EINTERNAL
		}
		msg = fmt.Sprint(he.Message)
		if status == http.StatusNotFound {
			msg = "no such route: " + c.Request().Method + " " + c.Request().URL.Path
		}
		if status == http.StatusRequestEntityTooLarge {
			msg = fmt.Sprintf("request body is over the limit of %d bytes; send fewer messages per call", s.opts.BodyLimit)
		}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The client went away or the request ran out of time: not a bug.
		status, code, msg = http.StatusServiceUnavailable, memory.EUNAVAILABLE, "request cancelled or timed out before it finished"
	default:
		code = memory.ErrorCode(err)
		status = api.StatusOf(code)
		if status == 0 {
			status = http.StatusInternalServerError
		}
		msg = memory.ErrorMessage(err)
	}
	unauthorizedHeader(c, status)
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		c.Response().Header().Set("Retry-After", "1")
	}
	if status >= 500 {
		s.opts.Logger.ErrorContext(c.Request().Context(), "request failed", "err", err, "code", code,
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	}
	body := api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: msg}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	if p := providerOf(c); p != "" {
		_ = c.JSON(status, providerErrorBody(p, status, code, msg, pe))
		return
	}
	_ = c.JSON(status, body)
}
