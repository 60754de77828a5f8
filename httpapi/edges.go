package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/labstack/echo/v4"
)

// headAsGet answers HEAD like GET without the body (RFC 9110 9.3.2), on
// every GET route, the binary's /metrics included. It sits outside echo:
// echo routes on the request net/http hands it, so a middleware cannot
// change the method it routes on. net/http keeps its own HEAD request, so
// it sends no body and no Content-Length of the discarded one.
func headAsGet(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodHead {
			h.ServeHTTP(w, r)
			return
		}
		get := r.WithContext(r.Context()) // a shallow copy
		get.Method = http.MethodGet
		h.ServeHTTP(headWriter{w}, get)
	})
}

// headWriter drops the body of a HEAD answer and keeps its status and headers.
type headWriter struct{ http.ResponseWriter }

func (w headWriter) Write(p []byte) (int, error) { return len(p), nil }

// Unwrap lets http.ResponseController reach the connection's writer.
func (w headWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// checkQuery refuses a query string that does not parse (?limit=%zz, a ';'
// separator): echo drops such a pair silently, so the request would run
// with the parameter's default instead of failing.
func checkQuery(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		raw := c.Request().URL.RawQuery
		if _, err := url.ParseQuery(raw); err != nil {
			return memory.Errorf(memory.EINVALID, "query string: %s: write a literal %% as %%25, and separate parameters with ampersands", badQueryPart(raw, err))
		}
		return next(c)
	}
}

// badQueryPart names the parameter that does not parse, so the message
// says which one ("limit=%zz"), not only what is wrong with it.
func badQueryPart(raw string, err error) string {
	for _, part := range strings.Split(raw, "&") {
		if strings.Contains(part, ";") {
			return fmt.Sprintf("%q: a ';' is not a separator", part)
		}
		k, v, _ := strings.Cut(part, "=")
		for _, s := range []string{k, v} {
			if _, perr := url.QueryUnescape(s); perr != nil {
				return fmt.Sprintf("%q: %v", part, perr)
			}
		}
	}
	return err.Error()
}
