package metrics_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/metrics"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

var errTeapot = errors.New("a domain error the server's error handler maps")

// newServer is an echo server shaped like ctxd's: parameterised routes, an
// error handler of its own, and middleware that returns errors.
func newServer(t *testing.T, m *metrics.Metrics) *httptest.Server {
	t.Helper()
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		if c.Response().Committed {
			return
		}
		code := http.StatusInternalServerError
		var he *echo.HTTPError
		switch {
		case errors.As(err, &he):
			code = he.Code
		case errors.Is(err, errTeapot):
			code = http.StatusTeapot
		}
		c.NoContent(code)
	}
	m.Instrument(e)
	e.GET("/v1/sessions/:id/messages", func(c echo.Context) error { return c.String(http.StatusOK, c.Param("id")) })
	e.POST("/v1/sessions/:id/messages", func(c echo.Context) error { return errTeapot })
	e.GET("/metrics", echo.WrapHandler(m.Handler()))
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return srv
}

func call(t *testing.T, method, url string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

func TestInstrumentLabelsByRoutePattern(t *testing.T) {
	m := metrics.New(nil)
	srv := newServer(t, m)
	for _, c := range []struct {
		method, path string
		want         int
	}{
		{"GET", "/v1/sessions/sess-aaa/messages", 200},
		{"GET", "/v1/sessions/sess-bbb/messages", 200},
		{"POST", "/v1/sessions/sess-aaa/messages", 418},    // error mapped by the server's handler
		{"DELETE", "/v1/sessions/sess-aaa/messages", 405},  // known route, wrong method
		{"GET", "/v1/sessions/sess-aaa/nothing-here", 404}, // no route: echo's tree still has a nearest pattern
		{"GET", "/sess-ccc", 404},
		{"BREW", "/v1/sessions/sess-aaa/messages", 405}, // a made-up method does not become a label value
	} {
		if got := call(t, c.method, srv.URL+c.path); got != c.want {
			t.Fatalf("%s %s = %d, want %d", c.method, c.path, got, c.want)
		}
	}
	want := `
# HELP ctxd_http_requests_total HTTP requests answered, by route pattern, method and status code.
# TYPE ctxd_http_requests_total counter
ctxd_http_requests_total{code="200",method="GET",route="/v1/sessions/:id/messages"} 2
ctxd_http_requests_total{code="404",method="GET",route="unmatched"} 2
ctxd_http_requests_total{code="405",method="DELETE",route="/v1/sessions/:id/messages"} 1
ctxd_http_requests_total{code="405",method="other",route="/v1/sessions/:id/messages"} 1
ctxd_http_requests_total{code="418",method="POST",route="/v1/sessions/:id/messages"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "ctxd_http_requests_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.Registry(), "ctxd_http_request_duration_seconds"); n != 5 {
		t.Errorf("%d latency series, want one per request counter series (5)", n)
	}
}

func TestHandlerServesTextFormat(t *testing.T) {
	m := metrics.New(nil)
	srv := newServer(t, m)
	call(t, "GET", srv.URL+"/v1/sessions/s1/messages")
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, want := range []string{
		`ctxd_http_requests_total{code="200",method="GET",route="/v1/sessions/:id/messages"} 1`,
		"go_goroutines ", "process_resident_memory_bytes ", `ctxd_compactions_total{trigger="auto"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(string(body), `"s1"`) {
		t.Error("a session id became a label value")
	}
}
