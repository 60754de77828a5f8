package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/numfmt"
)

func TestGauge(t *testing.T) {
	t.Parallel()
	for pct, want := range map[float64]string{
		0:     "[....................] 0%",
		0.049: "[....................] 5%",
		0.52:  "[##########..........] 52%",
		1:     "[####################] 100%",
		1.3:   "[####################] 130%",
	} {
		if got := gauge(pct); got != want {
			t.Errorf("gauge(%v) = %q, want %q", pct, got, want)
		}
	}
}

func TestCLIStatus(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/half", map[string]any{"context_window": 1000})
	for i := range 8 {
		ts.store("half", msg("user", chatter(i)))
	}
	ts.store("alpha", msg("user", "hello"))
	half := ts.sessionStatus("half")
	tokens := int(half["tokens"].(float64))

	t.Run("one session", func(t *testing.T) {
		out := ts.cli(t, 0, "status", "half").Out
		for _, want := range []string{"half", numfmt.Thousands(tokens) + " / 1,000", gauge(half["pct_used"].(float64)),
			half["state"].(string), "active 8, summarized 0, dropped 0, recovered 0", "compactions  0"} {
			if !strings.Contains(out, want) {
				t.Errorf("status half lacks %q:\n%s", want, out)
			}
		}
	})
	t.Run("one session JSON", func(t *testing.T) {
		got := decodeJSON(t, ts.cli(t, 0, "status", "half", "--json").Out)
		if got["id"] != "half" || got["tokens"] != half["tokens"] || got["state"] != half["state"] || got["context_window"] != 1000.0 {
			t.Fatalf("status --json = %v, want %v", got, half)
		}
	})
	t.Run("every session", func(t *testing.T) {
		rows := lines(ts.cli(t, 0, "status").Out)
		if len(rows) != 2 || !strings.HasPrefix(rows[0], "alpha ") || !strings.HasPrefix(rows[1], "half ") {
			t.Fatalf("status = %q, want a line for alpha then half", rows)
		}
		if !strings.Contains(rows[1], gauge(half["pct_used"].(float64))) || !strings.Contains(rows[1], half["state"].(string)) {
			t.Fatalf("half's line %q lacks its gauge or state", rows[1])
		}
	})
	t.Run("every session JSON", func(t *testing.T) {
		got := decodeJSON(t, ts.cli(t, 0, "status", "--json").Out)["sessions"].([]any)
		if len(got) != 2 || got[1].(map[string]any)["id"] != "half" || got[1].(map[string]any)["tokens"] != half["tokens"] {
			t.Fatalf("status --json sessions = %v", got)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		r := ts.cli(t, exitNotFound, "status", "nope")
		if !strings.Contains(r.Err, `session "nope"`) || !strings.Contains(r.Err, "not_found") || r.Out != "" {
			t.Fatalf("status nope: stderr %q stdout %q", r.Err, r.Out)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		ts.cli(t, exitUsage, "status", "a", "b")
		ts.cli(t, exitUsage, "status", "--bogus")
	})
}

func TestCLISessionsPages(t *testing.T) {
	setPageSize(t, 2)
	ts := startServer(t, t.TempDir())
	ts.mustDo(200, "PUT", "/v1/sessions/s-small", map[string]any{"context_window": 2000})
	ts.store("s-small", msg("user", "one"), msg("assistant", "two"))
	ts.store("s-b", msg("user", "three"))
	ts.store("s-c", msg("user", "four"))

	rows := lines(ts.cli(t, 0, "sessions").Out)
	if len(rows) != 4 || !strings.HasPrefix(rows[0], "ID ") {
		t.Fatalf("sessions = %q, want a header and 3 rows (two pages)", rows)
	}
	col := strings.Index(rows[0], "STATE")
	for i, id := range []string{"s-b", "s-c", "s-small"} {
		state := ts.sessionStatus(id)["state"].(string)
		if r := rows[i+1]; !strings.HasPrefix(r, id+" ") || !strings.HasPrefix(r[col:], state+" ") {
			t.Fatalf("row %q: want %s with state %s under the STATE column (%d)", r, id, state, col)
		}
	}
	if !strings.HasPrefix(rows[3], "s-small ") || !strings.Contains(rows[3], "2,000") {
		t.Fatalf("row of s-small = %q, want its window 2,000", rows[3])
	}
	got := decodeJSON(t, ts.cli(t, 0, "sessions", "--json").Out)["sessions"].([]any)
	var ids []string
	for _, s := range got {
		ids = append(ids, s.(map[string]any)["id"].(string))
	}
	if !slices.Equal(ids, []string{"s-b", "s-c", "s-small"}) {
		t.Fatalf("sessions --json ids = %v", ids)
	}
}

func TestCLIReset(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	for _, id := range []string{"r1", "r2", "r3"} {
		ts.store(id, msg("user", "keep me until confirmed"))
	}
	count := func() int {
		return len(ts.mustDo(200, "GET", "/v1/sessions", nil)["sessions"].([]any))
	}

	t.Run("no", func(t *testing.T) {
		r := ts.cliIn(t, exitAborted, strings.NewReader("no\n"), "reset")
		if !strings.Contains(r.Err, "Delete 3 sessions") || !strings.Contains(r.Err, "Type 'yes' to confirm:") {
			t.Fatalf("reset did not ask: stderr %q", r.Err)
		}
		if n := count(); n != 3 {
			t.Fatalf("after answering no, %d sessions left, want 3", n)
		}
	})
	t.Run("non-interactive", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "answer")
		if err := os.WriteFile(path, []byte("yes\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r := ts.cliIn(t, exitAborted, f, "reset")
		if !strings.Contains(r.Err, "--force") || strings.Contains(r.Err, "Type 'yes'") {
			t.Fatalf("reset from a file: stderr %q, want a refusal naming --force", r.Err)
		}
		if n := count(); n != 3 {
			t.Fatalf("after a non-interactive reset, %d sessions left, want 3", n)
		}
	})
	t.Run("yes", func(t *testing.T) {
		r := ts.cliIn(t, 0, strings.NewReader("yes\n"), "reset")
		if !strings.Contains(r.Out, "deleted 3 sessions") {
			t.Fatalf("reset yes: stdout %q", r.Out)
		}
		if n := count(); n != 0 {
			t.Fatalf("after yes, %d sessions left", n)
		}
		ts.mustDo(404, "GET", "/v1/sessions/r2", nil)
	})
	t.Run("force JSON", func(t *testing.T) {
		ts.store("r4", msg("user", "x"))
		got := decodeJSON(t, ts.cli(t, 0, "reset", "--force", "--json").Out)
		if fmt.Sprint(got["deleted"]) != "[r4]" || count() != 0 {
			t.Fatalf("reset --force --json = %v", got)
		}
		got = decodeJSON(t, ts.cli(t, 0, "reset", "--force", "--json").Out)
		if d, ok := got["deleted"].([]any); !ok || len(d) != 0 {
			t.Fatalf("reset of nothing = %v, want deleted: []", got)
		}
	})
}

func TestCLIUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	r := runCLI(t, nil, "sessions", "--server", url)
	if r.Code != exitUnreachable || !strings.Contains(r.Err, "cannot reach ctxd at "+url) || !strings.Contains(r.Err, "`ctxd serve` running") {
		t.Fatalf("unreachable: exit %d, stderr %q", r.Code, r.Err)
	}
}

func TestCLIUsageErrors(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"frobnicate"},
		{"sessions", "--server", "localhost:8080"},
		{"compact"},
		{"compact", "s", "--now", "--bogus"},
		{"drops"},
		{"cold", "list"},
		{"recover"},
		{"search"},
		{"search", "q", "--mode", "fuzzy"},
		{"context", "s"},
		{"logs"},
		{"logs", "drops", "-n", "0"},
		{"cold", "freeze"},
	} {
		// The server address is unused: each fails before any request.
		if !slices.Contains(args, "--server") {
			args = append(args, "--server", "http://127.0.0.1:1")
		}
		if r := runCLI(t, nil, args...); r.Code != exitUsage || r.Err == "" {
			t.Errorf("ctxd %s: exit %d, want %d; stderr %q", strings.Join(args, " "), r.Code, exitUsage, r.Err)
		}
	}
}

// TestCLIErrorAnswers drives the client against answers the real server
// gives only in setups these tests do not build (API keys, a proxy in front).
func TestCLIErrorAnswers(t *testing.T) {
	var auth []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = append(auth, r.Header.Get("Authorization"))
		switch {
		case r.Header.Get("Authorization") != "Bearer k1":
			w.WriteHeader(401)
			fmt.Fprint(w, `{"error":{"code":"unauthorized","message":"missing or unknown API key"}}`)
		case r.URL.Path == "/v1/sessions/busy":
			w.WriteHeader(409)
			fmt.Fprint(w, `{"error":{"code":"conflict","message":"session is being deleted"}}`)
		case r.URL.Path == "/v1/sessions/broken":
			w.WriteHeader(502)
			fmt.Fprint(w, "<html>bad gateway</html>")
		default:
			fmt.Fprint(w, `{"sessions":[],"next_cursor":""}`)
		}
	}))
	defer srv.Close()

	r := runCLI(t, nil, "sessions", "--server", srv.URL, "--api-key", "wrong")
	if r.Code != exitAuth || !strings.Contains(r.Err, "missing or unknown API key") || !strings.Contains(r.Err, "--api-key") {
		t.Fatalf("401: exit %d, stderr %q", r.Code, r.Err)
	}
	t.Setenv("CTXD_SERVER", srv.URL)
	t.Setenv("CTXD_API_KEY", "k1")
	if r := runCLI(t, nil, "status"); r.Code != 0 || !strings.Contains(r.Out, "no sessions") {
		t.Fatalf("with CTXD_SERVER and CTXD_API_KEY: exit %d, out %q, err %q", r.Code, r.Out, r.Err)
	}
	if auth[len(auth)-1] != "Bearer k1" {
		t.Fatalf("Authorization sent = %q, want Bearer k1", auth[len(auth)-1])
	}
	if r := runCLI(t, nil, "status", "busy"); r.Code != exitConflict || !strings.Contains(r.Err, "session is being deleted") {
		t.Fatalf("409: exit %d, stderr %q", r.Code, r.Err)
	}
	if r := runCLI(t, nil, "status", "broken"); r.Code != exitServer || !strings.Contains(r.Err, "bad gateway") {
		t.Fatalf("502: exit %d, stderr %q", r.Code, r.Err)
	}
}

// jsonLines decodes JSONL output.
func jsonLines(t *testing.T, out string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, l := range lines(out) {
		var e map[string]any
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line is not JSON: %q: %v", l, err)
		}
		evs = append(evs, e)
	}
	return evs
}
