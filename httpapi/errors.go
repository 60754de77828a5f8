package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// codeRequestTimeout is the client not sending its request in time: a code
// of the HTTP layer only, as the domain never waits on a client.
const codeRequestTimeout = "request_timeout"

func errReadTimeout(limit time.Duration) error {
	return memory.Errorf(codeRequestTimeout, "the request body did not arrive within the server's read timeout (--read-timeout %v): send the whole body at once, as declared by Content-Length", limit)
}

// statusOf maps domain error codes to HTTP statuses: the one table.
var statusOf = map[string]int{
	memory.EINVALID:      http.StatusBadRequest,
	memory.EUNAUTHORIZED: http.StatusUnauthorized,
	memory.EFORBIDDEN:    http.StatusForbidden,
	memory.ENOTFOUND:     http.StatusNotFound,
	memory.ECONFLICT:     http.StatusConflict,
	memory.ETOOLARGE:     http.StatusRequestEntityTooLarge,
	memory.ERATELIMITED:  http.StatusTooManyRequests,
	memory.EUNAVAILABLE:  http.StatusServiceUnavailable,
	memory.EINTERNAL:     http.StatusInternalServerError,
	codeRequestTimeout:   http.StatusRequestTimeout,
	memory.EDAMAGED:      http.StatusInternalServerError,
}

// codeOf maps statuses echo produces itself (routing, body limit) back to codes.
var codeOf = map[int]string{
	http.StatusBadRequest:            memory.EINVALID,
	http.StatusUnauthorized:          memory.EUNAUTHORIZED,
	http.StatusForbidden:             memory.EFORBIDDEN,
	http.StatusNotFound:              memory.ENOTFOUND,
	http.StatusMethodNotAllowed:      "method_not_allowed",
	http.StatusConflict:              memory.ECONFLICT,
	http.StatusRequestEntityTooLarge: memory.ETOOLARGE,
	http.StatusTooManyRequests:       memory.ERATELIMITED,
	http.StatusServiceUnavailable:    memory.EUNAVAILABLE,
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// handleError writes every error in API.md's shape, and logs internal ones
// (their detail stays in the log, not in the answer).
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, msg := http.StatusInternalServerError, memory.EINTERNAL, "internal error"
	var he *echo.HTTPError
	switch {
	case errors.As(err, &he):
		status = he.Code
		code = codeOf[status]
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
		status = statusOf[code]
		if status == 0 {
			status = http.StatusInternalServerError
		}
		msg = memory.ErrorMessage(err)
	}
	unauthorizedHeader(c, status)
	if status == http.StatusTooManyRequests {
		c.Response().Header().Set("Retry-After", "1")
	}
	if status >= 500 {
		s.opts.Logger.ErrorContext(c.Request().Context(), "request failed", "err", err, "code", code,
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID))
	}
	var body errorBody
	body.Error.Code, body.Error.Message = code, msg
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
