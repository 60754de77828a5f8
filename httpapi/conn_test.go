package httpapi

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Only net/http's own error answers are rewritten: an answer written by a
// handler, whatever its status and Content-Type, passes through as is.
func TestNetHTTPErrorMatchesOnlyNetHTTP(t *testing.T) {
	for _, c := range []struct {
		name, raw string
		status    int // 0: not one of net/http's
	}{
		{"bad request", "HTTP/1.1 400 Bad Request" + netHTTPErrorHeaders + "400 Bad Request", 400},
		{"headers too large", "HTTP/1.1 431 Request Header Fields Too Large" + netHTTPErrorHeaders + "431 Request Header Fields Too Large", 431},
		{"status error", "HTTP/1.1 505 HTTP Version Not Supported: unsupported protocol version" + netHTTPErrorHeaders + "505 HTTP Version Not Supported: unsupported protocol version", 505},
		{"expectation failed", "HTTP/1.1 417 Expectation Failed\r\nConnection: close\r\nDate: Thu, 26 Nov 2026 18:49:00 GMT\r\nContent-Length: 0\r\n\r\n", 417},
		{"a handler's JSON", "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nDate: Thu, 26 Nov 2026 18:49:00 GMT\r\nContent-Length: 2\r\n\r\n{}", 0},
		{"a handler's text/plain with Connection: close", "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: Thu, 26 Nov 2026 18:49:00 GMT\r\n\r\nx", 0},
		{"a body chunk", "400 Bad Request" + netHTTPErrorHeaders, 0},
	} {
		status, _, ok := netHTTPError([]byte(c.raw))
		if ok != (c.status != 0) || status != c.status {
			t.Errorf("%s: netHTTPError = %d, %v; want %d", c.name, status, ok, c.status)
		}
	}
}

// A handler's own text/plain answer with Connection: close reaches the
// client unchanged through the connection wrapper.
func TestHandlerAnswersPassThrough(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		http.Error(w, "plain", http.StatusBadRequest)
	}))
	srv.Listener = &limitedListener{Listener: srv.Listener, limits: &connLimits{byIP: map[string]int{}}}
	srv.Start()
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 400 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("a handler's answer was changed: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}
