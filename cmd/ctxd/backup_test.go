package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
)

// fetchExport reads GET /v1/export?query whole, as ts's caller.
func fetchExport(t *testing.T, ts *testServer, query string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("GET", ts.URL+"/v1/export?"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range ts.Header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /v1/export?%s: %v", query, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read /v1/export?%s: %v", query, err)
	}
	return res.StatusCode, b
}

// parsedExport is an export's records, checked whole by admin.CheckExport.
type parsedExport struct {
	sessions []*memory.Session
	messages map[string][]*memory.Message // by tenant/session
	trailer  *admin.ExportTrailer
}

func parseExport(t *testing.T, b []byte) parsedExport {
	t.Helper()
	if _, err := admin.CheckExport(bytes.NewReader(b)); err != nil {
		t.Fatalf("the export is not whole: %v\n%s", err, b)
	}
	p := parsedExport{messages: map[string][]*memory.Message{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 64<<20)
	var cur *memory.Session
	for sc.Scan() {
		var rec admin.ExportRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("export line %q: %v", sc.Text(), err)
		}
		switch rec.Type {
		case admin.RecordSession:
			cur = rec.Session
			p.sessions = append(p.sessions, cur)
		case admin.RecordMessage:
			k := cur.Tenant + "/" + cur.ID
			p.messages[k] = append(p.messages[k], rec.Message)
		case admin.RecordTrailer:
			p.trailer = rec.Trailer
		}
	}
	return p
}

func (p parsedExport) ids() []string {
	var out []string
	for _, s := range p.sessions {
		out = append(out, s.Tenant+"/"+s.ID)
	}
	return out
}

// An export taken while writers append is one snapshot: each session's
// counts (read with the session) match the messages exported for it (read
// after). Read session by session, a write landing in between breaks that.
func TestOnlineBackupConsistentWhileWriting(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	sessions := []string{"w0", "w1", "w2", "w3"}
	for _, s := range sessions {
		batch := make([]map[string]any, 100)
		for i := range batch {
			batch[i] = msg("user", fmt.Sprintf("seed message %d of %s about the harbour", i, s))
		}
		ts.store(s, batch...)
	}
	var written atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := ts.on(t)
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				r := w.do("POST", "/v1/sessions/"+s+"/messages", map[string]any{"messages": []any{
					msg("user", fmt.Sprintf("writer %d line %d", i, n)), msg("assistant", "noted")}})
				if r.Status != 201 {
					t.Errorf("write during export: %d %s", r.Status, r.Raw)
					return
				}
				written.Add(2)
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	overlapped := 0
	for round := 0; round < 20 && overlapped < 3; round++ {
		before := written.Load()
		status, body := fetchExport(t, ts, "all=true")
		if status != 200 {
			t.Fatalf("export: %d %s", status, body)
		}
		if written.Load() > before {
			overlapped++
		}
		p := parseExport(t, body)
		if len(p.sessions) != len(sessions) {
			t.Fatalf("export has sessions %v, want %v", p.ids(), sessions)
		}
		for _, s := range p.sessions {
			msgs := p.messages[s.Tenant+"/"+s.ID]
			var got memory.Counts
			for _, m := range msgs {
				got.Add(m.State, 1)
			}
			if got != s.Counts || uint64(len(msgs)) != s.LastSeq {
				t.Fatalf("round %d, session %s: counts %+v and last seq %d, but %d messages exported (%+v): not one snapshot",
					round, s.ID, s.Counts, s.LastSeq, len(msgs), got)
			}
		}
	}
	if overlapped == 0 {
		t.Fatal("no write ran during any export: the test proved nothing")
	}
}

// A key exports its own tenant only; an admin key any tenant, or all.
func TestOnlineBackupTenantIsolation(t *testing.T) {
	t.Parallel()
	ts := startWithKeys(t)
	ts.as(keyA).store("shared", msg("user", "tenant a's secret about quinces"))
	ts.as(keyA).store("only-a", msg("user", "more of a"))
	ts.as(keyB).store("shared", msg("user", "tenant b's note about plums"))

	check := func(who *testServer, query string, want ...string) {
		t.Helper()
		status, body := fetchExport(t, who, query)
		if status != 200 {
			t.Fatalf("export?%s: %d %s", query, status, body)
		}
		got := strings.Join(parseExport(t, body).ids(), ",")
		if got != strings.Join(want, ",") {
			t.Fatalf("export?%s has %s, want %s", query, got, want)
		}
		if who.Header.Get("Authorization") == "Bearer "+keyB && bytes.Contains(body, []byte("quinces")) {
			t.Fatalf("tenant b's export holds tenant a's content")
		}
	}
	check(ts.as(keyA), "all=true", "a/only-a", "a/shared")
	check(ts.as(keyB), "all=true", "b/shared")
	check(ts.as(keyB), "session=shared", "b/shared")
	check(ts.as(keyAdmin), "all=true", "a/only-a", "a/shared", "b/shared")
	check(ts.as(keyAdmin), "all=true&tenant=b", "b/shared")
	check(ts.as(keyAdmin, "a"), "all=true", "a/only-a", "a/shared")
	check(ts.as(keyAdmin), "session=shared&tenant=a", "a/shared")

	for _, c := range []struct {
		who    *testServer
		query  string
		status int
	}{
		{ts.as(keyB), "all=true&tenant=a", 403},
		{ts.as(keyB), "session=only-a", 404},
		{ts.as(keyB), "session=shared&tenant=a", 403},
		{ts, "all=true", 401},
		{ts.as(keyA), "", 400},
		{ts.as(keyA), "all=true&session=shared", 400},
		{ts.as(keyA), "all=maybe", 400},
		{ts.as(keyAdmin), "all=true&tenant=..%2Fetc", 400},
	} {
		status, body := fetchExport(t, c.who, c.query)
		if status != c.status || !bytes.HasPrefix(body, []byte(`{"error":`)) {
			t.Errorf("export?%s: %d %s, want %d with the JSON error", c.query, status, body, c.status)
		}
	}
}

// `ctxd export --server` of a running server gives the file a local export
// of the stopped server gives, and it imports into a new data dir that
// answers as the original.
func TestOnlineBackupImportsAndMatches(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	ts := startServer(t, src)
	populate(t, ts)
	want := answers(t, ts)
	online := filepath.Join(t.TempDir(), "online.jsonl")
	out, errOut, err := runCtxd(t, "export", "--server", ts.URL, "--all", "--vectors", "--out", online)
	if err != nil || !strings.Contains(errOut, "exported 3 sessions") {
		t.Fatalf("export --server: %v\nstdout: %s\nstderr: %s", err, out, errOut)
	}
	// Streamed to stdout too.
	one := mustRun(t, "export", "--server", ts.URL, "--session", "beta", "--out", "-")
	if p := parseExport(t, []byte(one)); len(p.sessions) != 1 || p.sessions[0].ID != "beta" || len(p.messages["default/beta"]) != 2 {
		t.Fatalf("export --server --session beta to stdout = %s", one)
	}
	ts.Stop()

	offline := filepath.Join(t.TempDir(), "offline.jsonl")
	mustRun(t, "export", "--data-dir", src, "--all", "--vectors", "--out", offline)
	if a, b := withoutHeader(t, online), withoutHeader(t, offline); a != b {
		t.Fatalf("the online export differs from the offline one\nonline:  %.2000s\noffline: %.2000s", a, b)
	}

	out = mustRun(t, "import", "--data-dir", dst, online)
	if !strings.Contains(out, "imported 3 sessions") || !strings.Contains(out, "0 embedded") {
		t.Fatalf("import said %q; want 3 sessions and the exported vectors kept", out)
	}
	ts = startServer(t, dst)
	if got := answers(t, ts); got != want {
		t.Fatalf("the data dir imported from the online export answers differently\nwant: %s\ngot:  %s", want, got)
	}
}

// cutProxy forwards GET /v1/export to upstream and cuts the answer: after
// n bytes with a broken connection, or (atLine) cleanly after the last line
// before the trailer, as a cut file would be.
func cutProxy(t *testing.T, upstream string, n int, atLine bool) *httptest.Server {
	t.Helper()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := http.Get(upstream + r.URL.RequestURI())
		if err != nil {
			t.Errorf("proxy: %v", err)
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		w.WriteHeader(res.StatusCode)
		if atLine {
			body := bytes.TrimSuffix(b, []byte("\n"))
			w.Write(body[:bytes.LastIndexByte(body, '\n')+1])
			return
		}
		w.Write(b[:n])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	t.Cleanup(p.Close)
	return p
}

// A stream cut short is detected: `ctxd export --server` fails and leaves
// no file, and `ctxd import` refuses a file without its trailer or with a
// trailer that says incomplete, while an export from before trailers
// still imports.
func TestOnlineBackupInterrupted(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	for _, s := range []string{"a", "b", "c"} {
		ts.store(s, msg("user", "a line of "+s), msg("assistant", "another line of "+s))
	}
	_, whole := fetchExport(t, ts, "all=true")
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		n      int
		atLine bool
	}{{"mid-line", len(whole) / 2, false}, {"before the trailer", 0, true}} {
		p := cutProxy(t, ts.URL, c.n, c.atLine)
		out := filepath.Join(dir, "cut.jsonl")
		_, errOut, err := runCtxd(t, "export", "--server", p.URL, "--all", "--out", out)
		if err == nil {
			t.Fatalf("%s: export --server of a cut stream succeeded: %s", c.name, errOut)
		}
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Fatalf("%s: a failed export left %s (%v)", c.name, out, serr)
		}
	}

	lines := strings.SplitAfter(strings.TrimSuffix(string(whole), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, `"type":"trailer"`) || !strings.Contains(last, `"complete":true`) {
		t.Fatalf("the export does not end in a complete trailer: %s", last)
	}
	body := lines[:len(lines)-1]
	incomplete := strings.Replace(last, `"complete":true`, `"complete":false,"error":"disk on fire"`, 1)
	miscounted := strings.Replace(last, `"messages":6`, `"messages":7`, 1)
	oldHeader := strings.Replace(body[0], `,"trailer":true`, "", 1)
	if oldHeader == body[0] || miscounted == last {
		t.Fatalf("the export's header or trailer is not as this test expects: %s %s", body[0], last)
	}
	write := func(name string, ls ...string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(strings.Join(ls, "")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, c := range []struct{ file, want string }{
		{write("no-trailer.jsonl", body...), "cut short"},
		{write("incomplete.jsonl", append(append([]string{}, body...), incomplete)...), "disk on fire"},
		{write("miscounted.jsonl", append(append([]string{}, body...), miscounted)...), "trailer counts"},
		{write("no-trailer-two-sessions.jsonl", body[:len(body)-3]...), "cut short"},
	} {
		_, _, err := runCtxd(t, "import", "--data-dir", t.TempDir(), c.file)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("import %s: %v, want an error saying %q", filepath.Base(c.file), err, c.want)
		}
	}
	old := write("old.jsonl", append([]string{oldHeader}, body[1:]...)...)
	if out := mustRun(t, "import", "--data-dir", t.TempDir(), old); !strings.Contains(out, "imported 3 sessions") {
		t.Fatalf("an export from before trailers: %s", out)
	}
}

// A failure of the server after the stream began (a damaged record met
// past the first 64 KiB) ends the body in an incomplete trailer and cuts
// the connection: a plain reader gets an error, `ctxd export --server`
// fails and leaves no file.
func TestOnlineBackupServerFailsMidStream(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	batch := make([]map[string]any, 100)
	for i := range batch {
		batch[i] = msg("user", fmt.Sprintf("%d %s", i, strings.Repeat("filler words for the first session ", 30)))
	}
	ts.store("aaa", batch...)
	ids := ts.store("zzz", msg("user", "the capybara naps"), msg("assistant", "the capybara wakes at noon"))
	ts.Stop()
	off, n := recordOffset(t, dir, ids[1])
	damageByte(t, dir, off+n-3)
	ts = startServer(t, dir)

	req, _ := http.NewRequest("GET", ts.URL+"/v1/export?all=true", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 200 || err == nil {
		t.Fatalf("export over a damaged record: status %d, read error %v; want 200 and a cut body", res.StatusCode, err)
	}
	if !bytes.Contains(body, []byte(`"complete":false`)) || !bytes.Contains(body, []byte("zzz")) {
		t.Fatalf("the cut body does not end in an incomplete trailer naming the session: %.300s", body[max(0, len(body)-300):])
	}
	out := filepath.Join(t.TempDir(), "b.jsonl")
	if _, errOut, err := runCtxd(t, "export", "--server", ts.URL, "--all", "--out", out); err == nil {
		t.Fatalf("export --server over a damaged record succeeded: %s", errOut)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a failed export left %s (%v)", out, err)
	}
	// The server goes on serving, writes included.
	ts.store("aaa", msg("user", "still here"))
}
