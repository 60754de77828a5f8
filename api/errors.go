package api

import (
	"net/http"

	"github.com/ctxd/ctxd/memory"
)

// CodeRequestTimeout is the client not sending its request in time: a code
// of the HTTP layer only, as the domain never waits on a client.
const CodeRequestTimeout = "request_timeout"

// CodeMethodNotAllowed is a route asked with a method it does not take.
const CodeMethodNotAllowed = "method_not_allowed"

// statusOf maps error codes to HTTP statuses: the one table, which the
// server answers by and the client reads back.
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
	CodeRequestTimeout:   http.StatusRequestTimeout,
	memory.EDAMAGED:      http.StatusInternalServerError,
}

// codeOf maps statuses back to codes, for answers that come without one:
// those the router makes itself (no route, body limit), or a proxy's.
var codeOf = map[int]string{
	http.StatusBadRequest:            memory.EINVALID,
	http.StatusUnauthorized:          memory.EUNAUTHORIZED,
	http.StatusForbidden:             memory.EFORBIDDEN,
	http.StatusNotFound:              memory.ENOTFOUND,
	http.StatusMethodNotAllowed:      CodeMethodNotAllowed,
	http.StatusConflict:              memory.ECONFLICT,
	http.StatusRequestEntityTooLarge: memory.ETOOLARGE,
	http.StatusTooManyRequests:       memory.ERATELIMITED,
	http.StatusServiceUnavailable:    memory.EUNAVAILABLE,
}

// StatusOf is the HTTP status of an error code; 0 for a code it does not know.
func StatusOf(code string) int { return statusOf[code] }

// CodeOf is the error code a status stands for; "" for a status that
// stands for none.
func CodeOf(status int) string { return codeOf[status] }
