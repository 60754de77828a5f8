package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
)

// syncBuffer is a log destination shared by the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged runs a server whose log goes to the returned buffer.
func startLogged(t *testing.T, mutate func(*Config)) (*testServer, *syncBuffer) {
	t.Helper()
	cfg := testConfig(t.TempDir())
	cfg.LogLevel = "info"
	mutate(&cfg)
	m := NewMain(cfg)
	out := &syncBuffer{}
	m.Logger = server.NewLogger(cfg, out)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background(), ln); err != nil {
		t.Fatal(err)
	}
	ts := &testServer{t: t, Main: m, URL: "http://" + m.Addr.String(), Dir: cfg.DataDir}
	t.Cleanup(ts.Stop)
	return ts, out
}

func TestLogsCarryRequestIDsNotContent(t *testing.T) {
	t.Parallel()
	ts, out := startLogged(t, func(c *Config) { c.LogFormat = "json" })
	ts.store("s", msg("user", "the vault code is pineapple-7731"))
	ts.search(map[string]any{"query": "vault pineapple"})
	ts.do("POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("bogus", "pineapple again")}})
	ts.Stop()
	logged := out.String()
	if strings.Contains(logged, "pineapple") {
		t.Fatalf("message content reached the log without --log-content:\n%s", logged)
	}
	requests := 0
	for _, line := range strings.Split(strings.TrimSpace(logged), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("--log-format json wrote a line that is not JSON: %q", line)
		}
		if rec["msg"] == "request" {
			requests++
			if id, _ := rec["request_id"].(string); id == "" || rec["tenant"] != "default" {
				t.Errorf("request line without request id or tenant: %v", rec)
			}
		}
	}
	if requests != 3 {
		t.Fatalf("%d request lines logged, want 3:\n%s", requests, logged)
	}
}

func TestLogContentOptIn(t *testing.T) {
	t.Parallel()
	ts, out := startLogged(t, func(c *Config) { c.LogContent = true })
	ts.store("s", msg("user", "the vault code is pineapple-7731"))
	ts.Stop()
	if !strings.Contains(out.String(), "pineapple-7731") {
		t.Fatalf("--log-content did not log the request body:\n%s", out.String())
	}
}

// What a library prints through the standard log package (Bleve falling
// back to an older index snapshot) reaches the server's log as a
// structured warning.
func TestLibraryLogRouted(t *testing.T) {
	flags, out := log.Flags(), log.Writer()
	t.Cleanup(func() { log.SetFlags(flags); log.SetOutput(out) })
	var b bytes.Buffer
	routeLibraryLog(slog.New(slog.NewJSONHandler(&b, nil)))
	log.Printf("unable to load snapshot, failed to load segment: %s, continuing", "0000006d.zap")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("not one JSON record: %q: %v", b.String(), err)
	}
	if rec["level"] != "WARN" || rec["component"] != "library" ||
		rec["msg"] != "unable to load snapshot, failed to load segment: 0000006d.zap, continuing" {
		t.Fatalf("record %v", rec)
	}
}
