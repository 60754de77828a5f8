package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawConn dials the test server; the deadline makes a server that never
// answers or never closes fail the test instead of hanging it.
func rawConn(t *testing.T, ts *testServer, deadline time.Duration) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.Main.Addr.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	return c
}

// readJSONError reads one answer from c and checks it is API.md's error
// with the given status.
func readJSONError(t *testing.T, br *bufio.Reader, status int) *http.Response {
	t.Helper()
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", res.StatusCode, status, raw)
	}
	r := resp{Status: res.StatusCode, Raw: raw}
	if err := json.Unmarshal(raw, &r.Body); err != nil || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d answer is not JSON (%s, %v): %q", status, res.Header.Get("Content-Type"), err, raw)
	}
	checkErrorShape(t, r)
	return res
}

// expectClosed asserts the server closed c: a read ends (EOF or reset)
// before the connection's deadline.
func expectClosed(t *testing.T, c net.Conn, br io.Reader) {
	t.Helper()
	_, err := io.Copy(io.Discard, br)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatal("the server kept the connection open")
	}
}

// A client that declares a body and stalls, or stalls in its headers, or
// idles, loses its connection after the configured timeout; the stalled
// body is answered 408 with the JSON error. Before the read timeout
// existed such a connection was held for good (150 s observed, with a 5 s
// --request-timeout).
func TestSlowClientTimeouts(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) {
		c.ReadTimeout, c.ReadHeaderTimeout, c.IdleTimeout = time.Second, 500*time.Millisecond, 500*time.Millisecond
	})
	t.Run("stalled body", func(t *testing.T) {
		c := rawConn(t, ts, 10*time.Second)
		start := time.Now()
		io.WriteString(c, "POST /v1/sessions/slow/messages HTTP/1.1\r\nHost: ctxd\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"messages\":[")
		br := bufio.NewReader(c)
		readJSONError(t, br, http.StatusRequestTimeout)
		expectClosed(t, c, br)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("answered after %v with a read timeout of 1s", d)
		}
		ts.mustDo(404, "GET", "/v1/sessions/slow", nil)
	})
	t.Run("stalled headers", func(t *testing.T) {
		c := rawConn(t, ts, 10*time.Second)
		io.WriteString(c, "GET /v1/sessions HTTP/1.1\r\nHost: ctxd\r\n")
		expectClosed(t, c, c)
	})
	t.Run("idle keep-alive", func(t *testing.T) {
		c := rawConn(t, ts, 10*time.Second)
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: ctxd\r\n\r\n")
		br := bufio.NewReader(c)
		res, err := http.ReadResponse(br, nil)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("healthz: %v %v", res, err)
		}
		io.Copy(io.Discard, res.Body)
		expectClosed(t, c, br)
	})
}

// Connections over --max-conns-per-ip are answered 503 with the JSON error
// and closed; a closed one frees its place.
func TestConnectionCaps(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) { c.MaxConnsPerIP = 3 })
	var held []net.Conn
	for range 3 {
		held = append(held, rawConn(t, ts, 10*time.Second))
	}
	c := rawConn(t, ts, 10*time.Second)
	res := readJSONError(t, bufio.NewReader(c), http.StatusServiceUnavailable)
	if res.Header.Get("Retry-After") == "" {
		t.Fatal("503 for a connection over the cap without Retry-After")
	}
	// The held connections still work; the server closes held[0] after
	// answering (Connection: close), and its place is free once the client
	// sees the close: the count drops before the socket closes.
	io.WriteString(held[0], "GET /healthz HTTP/1.1\r\nHost: ctxd\r\nConnection: close\r\n\r\n")
	br := bufio.NewReader(held[0])
	if res, err := http.ReadResponse(br, nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("a connection under the cap: %v %v", res, err)
	}
	expectClosed(t, held[0], br)
	c = rawConn(t, ts, 10*time.Second)
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: ctxd\r\nConnection: close\r\n\r\n")
	if res, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || res.StatusCode != 200 {
		t.Fatalf("after a connection closed: %v %v, want its place free", res, err)
	}
}

// Requests net/http refuses before any handler runs are answered with
// API.md's JSON error, like every other error.
func TestNetHTTPErrorsAreJSON(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) { c.MaxHeaderBytes = 64 << 10 })
	for _, r := range []struct {
		name, request string
		status        int
	}{
		{"2 MiB header", "GET /v1/sessions HTTP/1.1\r\nHost: ctxd\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n", 431},
		{"header just over the limit", "GET /v1/sessions HTTP/1.1\r\nHost: ctxd\r\nX-Big: " + strings.Repeat("a", 72<<10) + "\r\n\r\n", 431},
		{"bad request line", "GARBAGE\r\n\r\n", 400},
		{"negative Content-Length", "POST /v1/search HTTP/1.1\r\nHost: ctxd\r\nContent-Length: -5\r\n\r\n", 400},
		{"two Content-Lengths", "POST /v1/search HTTP/1.1\r\nHost: ctxd\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400},
		{"NUL in the path", "GET /v1/ses\x00sions HTTP/1.1\r\nHost: ctxd\r\n\r\n", 400},
		{"space in the path", "GET /v1/ses sions HTTP/1.1\r\nHost: ctxd\r\n\r\n", 400},
		{"no Host", "GET /v1/sessions HTTP/1.1\r\n\r\n", 400},
		{"bad header line", "GET /v1/sessions HTTP/1.1\r\nHost: ctxd\r\nno colon here\r\n\r\n", 400},
		{"unknown Transfer-Encoding", "POST /v1/search HTTP/1.1\r\nHost: ctxd\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
		{"HTTP/2.5", "GET /healthz HTTP/2.5\r\nHost: ctxd\r\n\r\n", 505},
		{"Expect: magic", "GET /healthz HTTP/1.1\r\nHost: ctxd\r\nExpect: magic\r\n\r\n", 417},
	} {
		t.Run(r.name, func(t *testing.T) {
			c := rawConn(t, ts, 10*time.Second)
			go io.WriteString(c, r.request) // a large header may block until the server answers
			readJSONError(t, bufio.NewReader(c), r.status)
		})
	}
	// Handlers' own answers pass through untouched.
	ts.mustDo(200, "GET", "/healthz", nil)
}

// HEAD answers like GET, without the body, wherever GET does.
func TestHeadLikeGet(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("s", msg("user", "hello"))
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json", "/metrics", "/v1/sessions", "/v1/sessions/s",
		"/v1/sessions/s/messages", "/v1/sessions/s/cold", "/v1/sessions/nope", "/v1/sessions?limit=%zz"} {
		get, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, get.Body)
		get.Body.Close()
		head, err := http.Head(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != get.StatusCode || len(body) != 0 || head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s: %d %q with %d body bytes; GET: %d %q", path, head.StatusCode, head.Header.Get("Content-Type"), len(body), get.StatusCode, get.Header.Get("Content-Type"))
		}
	}
	// HEAD is GET's: a route without GET still refuses it.
	req, _ := http.NewRequest("HEAD", ts.URL+"/v1/search", nil)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != 405 {
		t.Fatalf("HEAD /v1/search: %v %v, want 405", res, err)
	}
}

// Request bodies in flight are bounded by --max-body-bytes-in-flight: a
// body that would pass it answers 503 with Retry-After and the JSON error,
// while smaller ones that fit, and the same body later, are served.
func TestBodyBytesInFlight(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) { c.MaxBodyInFlight = 64 << 10 })
	body := func(words int) []byte {
		b, _ := json.Marshal(map[string]any{"messages": []any{msg("user", strings.Repeat("river ", words))}})
		return b
	}
	first := body(40 << 10 / 6)
	c := rawConn(t, ts, 30*time.Second)
	// Expect: 100-continue makes the server say when the handler starts
	// reading the body, which is after it took the body's share.
	io.WriteString(c, "POST /v1/sessions/a/messages HTTP/1.1\r\nHost: ctxd\r\nContent-Type: application/json\r\nExpect: 100-continue\r\n"+
		"Content-Length: "+strconv.Itoa(len(first))+"\r\n\r\n")
	br := bufio.NewReader(c)
	if line, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(line, "HTTP/1.1 100") {
		t.Fatalf("no 100 Continue: %q %v", line, err)
	}
	br.ReadString('\n') // the blank line after it

	res, err := http.Post(ts.URL+"/v1/sessions/b/messages", "application/json", bytes.NewReader(body(40<<10/6)))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	r := resp{Status: res.StatusCode, Raw: raw}
	json.Unmarshal(raw, &r.Body)
	if r.Status != 503 || r.errCode() != "unavailable" || !strings.Contains(string(raw), "max-body-bytes-in-flight") || res.Header.Get("Retry-After") == "" {
		t.Fatalf("a body over the budget: %d %s (Retry-After %q), want 503 naming the setting", r.Status, raw, res.Header.Get("Retry-After"))
	}
	// What fits beside the first body is served.
	ts.mustDo(200, "PUT", "/v1/sessions/c", map[string]any{"context_window": 4000})

	c.Write(first)
	res, err = http.ReadResponse(br, nil)
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("the first body: %v %v", res, err)
	}
	io.Copy(io.Discard, res.Body)
	// Its share is given back once its answer is written.
	ts.mustDo(201, "POST", "/v1/sessions/b/messages", body(40<<10/6))
}

// Bodies sent before a key is checked take no share of the in-flight
// budget: two connections announcing 8 MiB logins to the dashboard, and
// never sending them, took the whole default budget (16 MiB), and every
// authenticated write answered 503 until the read timeout.
func TestUnauthenticatedBodiesTakeNoBudget(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	for range 2 {
		c := rawConn(t, ts, 30*time.Second)
		io.WriteString(c, "POST /ui/login HTTP/1.1\r\nHost: ctxd\r\nContent-Type: application/x-www-form-urlencoded\r\nExpect: 100-continue\r\n"+
			"Content-Length: "+strconv.Itoa(8<<20)+"\r\n\r\n")
		// The server's first line says the handler has the request: 100
		// when it starts reading the body, 413 when it refuses it unread.
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("no answer to an 8 MiB login: %v", err)
		}
		if !strings.HasPrefix(line, "HTTP/1.1 413") {
			t.Errorf("an 8 MiB login form: %q, want 413 before its body is read", line)
		}
	}
	a := ts.as(keyA)
	a.mustDo(201, "POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("user", "the budget is ours")}})
	a.mustDo(200, "POST", "/v1/search", map[string]any{"query": "budget"})
}
