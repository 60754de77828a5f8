package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
)

// A body's share of the in-flight budget is given back when its answer
// starts, not when its handler returns: a client that sends its next call
// as soon as it has read the answer must not find its own last call still
// holding the budget (an agent resending an 8 MB history was told 503 on
// its next call when the handler had not yet returned).
func TestBodyShareGivenBackWithTheAnswer(t *testing.T) {
	testServer(t)
	s := New(shared.svc, Options{Logger: shared.srv.opts.Logger, BodyBytesInFlight: 1 << 20})
	answered, done := make(chan struct{}), make(chan struct{})
	s.e.POST("/held", func(c echo.Context) error {
		if _, err := io.ReadAll(c.Request().Body); err != nil {
			return err
		}
		err := c.String(http.StatusOK, "ok")
		c.Response().Flush()
		close(answered)
		<-done // the handler has not returned yet
		return err
	}, s.limitBody)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	res, err := http.Post(srv.URL+"/held", "application/json", strings.NewReader(strings.Repeat("x", 1000)))
	if err != nil {
		t.Fatal(err)
	}
	<-answered
	held := s.bodies.inUse()
	close(done)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
	if held != 0 {
		t.Errorf("%d bytes still held once the answer was written, want 0", held)
	}
}
