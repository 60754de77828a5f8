package httpapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
)

// connLimits caps open connections in total and per client IP. Timeouts
// bound how long one connection is held; the caps bound how many a client
// holds at once (300 slow connections were held before either existed).
type connLimits struct {
	max, perIP int

	mu   sync.Mutex
	open int
	byIP map[string]int
}

// limitedListener wraps every accepted connection in a jsonErrConn, and
// answers connections over a cap with a JSON 503 instead of serving them.
type limitedListener struct {
	net.Listener
	limits *connLimits
}

func (l *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if why := l.limits.take(ip); why != "" {
			go refuseConn(c, why)
			continue
		}
		return &jsonErrConn{Conn: c, release: sync.OnceFunc(func() { l.limits.give(ip) })}, nil
	}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// take counts a new connection from ip, or says why it is over a cap.
func (l *connLimits) take(ip string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.max > 0 && l.open >= l.max:
		return fmt.Sprintf("the server holds its maximum of %d connections (--max-conns); retry shortly", l.max)
	case l.perIP > 0 && l.byIP[ip] >= l.perIP:
		return fmt.Sprintf("this client address holds its maximum of %d connections (--max-conns-per-ip): reuse connections (keep-alive) or close idle ones", l.perIP)
	}
	l.open++
	l.byIP[ip]++
	return ""
}

func (l *connLimits) give(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
}

// refuseConn answers a connection over a cap with API.md's error and
// closes it. It writes before reading the request (HTTP/1.1 clients read an
// early answer), then drains what the client sends for a moment: closing a
// socket with unread data sends a reset, which can destroy the answer
// before the client reads it.
func refuseConn(c net.Conn, why string) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Write(rawErrorResponse(http.StatusServiceUnavailable, memory.EUNAVAILABLE, why, "Retry-After: 1\r\n"))
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
	var buf [4096]byte
	for {
		if _, err := c.Read(buf[:]); err != nil {
			return
		}
	}
}

// rawErrorResponse is a complete HTTP/1.1 answer carrying API.md's error
// body, for the places that answer below net/http's handlers.
func rawErrorResponse(status int, code, message, extraHeaders string) []byte {
	body := api.ErrorBody{Error: api.ErrorDetail{Code: code, Message: message}}
	js, _ := json.Marshal(body) // a struct of two strings always marshals
	return fmt.Appendf(nil, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%sConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(js), extraHeaders, js)
}

// jsonErrConn turns the plain-text answers net/http writes on its own, before
// any handler runs (a malformed request line, a bad Content-Length, headers
// over MaxHeaderBytes, an unsupported Transfer-Encoding, an Expect other than
// 100-continue), into API.md's JSON error. net/http writes each of them straight to the connection in one
// Write, as "HTTP/1.1 <status>" + netHTTPErrorHeaders + text, and then closes
// it. Every answer that comes through a handler carries a Date header, which
// these never do, so no handler's answer is rewritten; and ctxd's bodies
// (JSON, Prometheus text) hold no raw CR, so no body chunk can look like
// one of them. TestNetHTTPErrorsAreJSON
// pins that format: a Go release that changes it fails the test, not clients.
type jsonErrConn struct {
	net.Conn
	release func()
}

// netHTTPErrorHeaders is what net/http (server.go, conn.serve) puts between
// the status line and the text of its own error answers.
const netHTTPErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c *jsonErrConn) Write(p []byte) (int, error) {
	if status, text, ok := netHTTPError(p); ok {
		if _, err := c.Conn.Write(rawErrorResponse(status, netHTTPCode(status), netHTTPMessage(status, text), "")); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// CloseWrite passes net/http's half-close through (it sends one after a 431
// so that the client reads the answer before the connection resets).
func (c *jsonErrConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *jsonErrConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// netHTTPError recognises one of net/http's own error answers and returns
// its status and text.
func netHTTPError(p []byte) (status int, text string, ok bool) {
	// An Expect header other than 100-continue: net/http answers 417 with
	// no body through the usual writer (so with a Date). No ctxd handler
	// answers 417.
	if bytes.HasPrefix(p, []byte("HTTP/1.1 417 ")) && bytes.HasSuffix(p, []byte("\r\nContent-Length: 0\r\n\r\n")) {
		return http.StatusExpectationFailed, "the Expect header may only be 100-continue", true
	}
	rest, found := bytes.CutPrefix(p, []byte("HTTP/1.1 "))
	if !found || len(rest) < 3 {
		return 0, "", false
	}
	head, body, found := bytes.Cut(rest, []byte(netHTTPErrorHeaders))
	if !found || bytes.Contains(head, []byte("\r\n")) {
		return 0, "", false // more headers than net/http's own: a handler's answer
	}
	status, err := strconv.Atoi(string(rest[:3]))
	if err != nil || status < 400 {
		return 0, "", false
	}
	return status, string(body), true
}

func netHTTPCode(status int) string {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return memory.ETOOLARGE
	case http.StatusNotImplemented:
		return "not_implemented"
	}
	return memory.EINVALID
}

func netHTTPMessage(status int, text string) string {
	switch status {
	case http.StatusRequestHeaderFieldsTooLarge:
		return "request headers are over the server's limit (--max-header-bytes): send fewer or shorter headers"
	case http.StatusBadRequest:
		return "malformed HTTP request: its request line, a header or its Content-Length could not be parsed"
	}
	return text
}
