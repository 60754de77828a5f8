package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// gigabyte is a generated 1 GiB JSON-looking body that counts what was read.
type gigabyte struct {
	head string
	n    atomic.Int64
}

const gib = 1 << 30

func (g *gigabyte) Read(p []byte) (int, error) {
	off := g.n.Load()
	if off >= gib {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), gib-off)]
	for i := range p {
		if j := off + int64(i); j < int64(len(g.head)) {
			p[i] = g.head[j]
		} else {
			p[i] = 'a'
		}
	}
	g.n.Add(int64(len(p)))
	return len(p), nil
}

// TestHostileGigabyteBodies streams a 1 GiB body to every body route over a
// real connection, with its length declared and chunked, and checks that the
// server answers 413 having taken no more than its limit plus what the
// kernel's socket buffers hold: the body is never read whole.
func TestHostileGigabyteBodies(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("streams tens of megabytes per row")
	}
	ts := startServer(t, t.TempDir())
	seedHostile(t, ts)
	before := ts.stableSnapshot(t)
	limit := ts.Main.Config.BodyLimit
	// Loopback socket buffers take a few MiB each way; the server's read
	// is at most the limit. A body read whole would be 1 GiB.
	bound := limit + 64<<20
	for _, r := range []struct{ method, path, head string }{
		{"PUT", "/v1/sessions/big", `{"metadata":{"k":"`},
		{"POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"`},
		{"POST", "/v1/search", `{"query":"`},
		{"POST", "/v1/sessions/s/compact", `{"prompt":"`},
		{"POST", "/v1/sessions/s/context", `{"prompt":"`},
		// Recover takes no body and never reads one, whatever its declared
		// size: it is ignored (404 here), so the row names no message to
		// keep the store as it was.
		{"POST", "/v1/sessions/s/messages/no-such-message/recover", `{"x":"`},
	} {
		for _, chunked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s %s chunked=%v", r.method, r.path, chunked), func(t *testing.T) {
				body := &gigabyte{head: r.head}
				start := time.Now()
				status, raw := streamBody(t, ts, r.method, r.path, body, chunked)
				sent := body.n.Load()
				t.Logf("%d after %.1f MiB sent in %v", status, float64(sent)/(1<<20), time.Since(start).Round(time.Millisecond))
				want := 413
				if strings.HasSuffix(r.path, "/recover") {
					want = 404
				}
				if status != want {
					t.Fatalf("status %d: %.300s", status, raw)
				}
				var e struct {
					Error struct{ Code, Message string }
				}
				if err := json.Unmarshal(raw, &e); err != nil || (status == 413 && e.Error.Code != "too_large") || e.Error.Message == "" {
					t.Fatalf("answer %.300s is not the API's error (%v)", raw, err)
				}
				if sent > bound {
					t.Fatalf("the client sent %d bytes before the answer: the server reads past its limit of %d", sent, limit)
				}
				if after := ts.fullSnapshot(t); after != before {
					t.Fatalf("an oversized body changed the store:\n%s\n%s", before, after)
				}
			})
		}
	}
}

// streamBody sends method path with body over a raw connection, as a client
// that keeps writing until the server answers, and returns the answer.
func streamBody(t *testing.T, ts *testServer, method, path string, body io.Reader, chunked bool) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// A deadline only so a server that reads forever fails the test rather
	// than hanging it.
	_ = conn.SetDeadline(time.Now().Add(2 * time.Minute))
	length := fmt.Sprintf("Content-Length: %d", gib)
	if chunked {
		length = "Transfer-Encoding: chunked"
	}
	fmt.Fprintf(conn, "%s %s HTTP/1.1\r\nHost: ctxd\r\nContent-Type: application/json\r\n%s\r\n\r\n", method, path, length)
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		var w io.Writer = conn
		if chunked {
			cw := httputil.NewChunkedWriter(conn)
			defer cw.Close()
			w = cw
		}
		_, _ = io.Copy(w, body) // ends with an error once the server hangs up
	}()
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	conn.Close()
	<-wrote
	return res.StatusCode, raw
}
