package httpapi

import (
	"bytes"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"
)

// Request bodies carry what agents were told; they reach the log only with
// --log-content, and then only their first bytes.
const (
	bodyKey     = "ctxd.body"
	loggedBytes = 4 << 10
)

// headBuffer keeps the first loggedBytes written to it.
type headBuffer struct{ bytes.Buffer }

func (b *headBuffer) Write(p []byte) (int, error) {
	if room := loggedBytes - b.Len(); room > 0 {
		b.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

type teeBody struct {
	io.Reader
	io.Closer
}

// captureBody copies the head of the request body, as the handler reads
// it, for the request log line.
func captureBody(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Body != nil && r.Body != http.NoBody {
			buf := &headBuffer{}
			r.Body = teeBody{io.TeeReader(r.Body, buf), r.Body}
			c.Set(bodyKey, buf)
		}
		return next(c)
	}
}
