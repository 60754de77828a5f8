package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/memory"
)

// runCtxd runs the ctxd command line in process and returns what it printed.
func runCtxd(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs(args)
	err = root.ExecuteContext(context.Background())
	return out.String(), errb.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := runCtxd(t, args...)
	if err != nil {
		t.Fatalf("ctxd %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// populate writes sessions with every kind of message a data dir holds:
// metadata, tool calls, pinned and important ones, a compaction (dropped,
// summarized and summary messages with cold info), a recovery and a
// session's own policy.
func populate(t *testing.T, ts *testServer) {
	t.Helper()
	for _, s := range []string{"alpha", "gamma"} {
		ts.mustDo(200, "PUT", "/v1/sessions/"+s, map[string]any{"context_window": 100000, "keep_recent": 4,
			"metadata": map[string]any{"project": "bluefin", "n": 7}})
		ts.store(s, map[string]any{"role": "system", "content": "Rules: never delete production data.", "pinned": true},
			map[string]any{"role": "user", "content": "the API key lives in vault path secret/billing", "important": true,
				"metadata": map[string]any{"source": "chat", "line": 12, "ok": true, "ratio": 0.25}})
		for i := range 30 {
			ts.store(s, msg([]string{"user", "assistant"}[i%2], chatter(i)+" "+s))
		}
		ts.store(s, map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": "c9", "type": "function", "function": map[string]any{"name": "read_file", "arguments": `{"path":"/srv/a"}`}}}},
			map[string]any{"role": "tool", "tool_call_id": "c9", "content": "file contents here"},
			msg("user", "thanks, what about the zebra migration?"), msg("assistant", "the zebra migration runs on friday"))
		ts.mustDo(200, "PUT", "/v1/sessions/"+s, map[string]any{"context_window": 2000})
		rep := ts.mustDo(200, "POST", "/v1/sessions/"+s+"/compact", map[string]any{"prompt": "billing vault secret"})
		if len(rep["dropped"].([]any))+len(rep["summarized"].([]any)) == 0 {
			t.Fatalf("compaction of %s moved nothing cold: %v", s, rep)
		}
	}
	cold := ts.mustDo(200, "GET", "/v1/sessions/alpha/cold?limit=5", nil)
	id := cold["chunks"].([]any)[0].(map[string]any)["id"]
	ts.mustDo(200, "POST", fmt.Sprintf("/v1/sessions/alpha/messages/%s/recover", id), nil)
	ts.mustDo(200, "PUT", "/v1/sessions/beta", map[string]any{"relevance_cutoff": 0.07})
	ts.store("beta", msg("user", "a short session about penguins"), msg("assistant", "penguins live in the south"))
}

var searches = []map[string]any{
	{"query": "zebra migration", "k": 5},
	{"query": "vault billing secret", "mode": "text", "k": 5},
	{"query": "penguins", "mode": "vector", "k": 3},
	{"query": "the train ran late", "states": []string{"dropped", "summarized"}, "k": 5},
}

// answers is what the API says about everything stored: sessions, every
// message in every state, and a few searches.
func answers(t *testing.T, ts *testServer) string {
	t.Helper()
	var b strings.Builder
	list := ts.mustDo(200, "GET", "/v1/sessions?limit=1000", nil)
	fmt.Fprintln(&b, list)
	for _, s := range []string{"alpha", "beta", "gamma"} {
		fmt.Fprintln(&b, ts.mustDo(200, "GET", "/v1/sessions/"+s, nil))
		fmt.Fprintln(&b, allMessages(ts, s))
		fmt.Fprintln(&b, ts.mustDo(200, "GET", "/v1/sessions/"+s+"/cold?limit=1000", nil))
	}
	for _, q := range searches {
		var ids []string
		res := ts.search(q)
		if len(res) == 0 {
			t.Fatalf("search %v found nothing: a comparison of empty answers proves nothing", q)
		}
		for _, r := range res {
			ids = append(ids, fmt.Sprintf("%s:%.4f", r.ID, r.Score))
		}
		fmt.Fprintln(&b, q, ids)
	}
	return b.String()
}

// withoutHeader drops an export's first line (it carries the export time).
func withoutHeader(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(b, []byte("\n"))
	return string(rest)
}

func TestAdminExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	src, dst := t.TempDir(), t.TempDir()
	ts := startServer(t, src)
	populate(t, ts)
	want := answers(t, ts)
	ts.Stop()

	file := filepath.Join(t.TempDir(), "all.jsonl")
	mustRun(t, "export", "--data-dir", src, "--all", "--vectors", "--out", file)
	out := mustRun(t, "import", "--data-dir", dst, file)
	if !strings.Contains(out, "imported 3 sessions") || !strings.Contains(out, "0 embedded") {
		t.Fatalf("import said %q; want 3 sessions and the exported vectors kept", out)
	}
	if out := mustRun(t, "verify", "--data-dir", dst); !strings.Contains(out, "consistent") {
		t.Fatalf("verify after import: %s", out)
	}

	ts = startServer(t, dst)
	if got := answers(t, ts); got != want {
		t.Fatalf("the imported data dir answers differently\nwant: %s\ngot:  %s", want, got)
	}
	ts.Stop()
	// Exporting the copy gives the same file: nothing was lost or changed.
	again := filepath.Join(t.TempDir(), "again.jsonl")
	mustRun(t, "export", "--data-dir", dst, "--all", "--vectors", "--out", again)
	if withoutHeader(t, again) != withoutHeader(t, file) {
		t.Fatal("an export of the imported data dir differs from the original export")
	}

	// One session to stdout, without vectors.
	one := mustRun(t, "export", "--data-dir", dst, "--session", "beta", "--out", "-")
	lines := strings.Split(strings.TrimSpace(one), "\n")
	if len(lines) != 5 || !strings.Contains(lines[1], `"relevance_cutoff":0.07`) || strings.Contains(one, `"vector"`) {
		t.Fatalf("export of beta to stdout = %s", one)
	}

	// Importing over existing sessions is refused before anything is written.
	_, _, err := runCtxd(t, "import", "--data-dir", dst, file)
	if err == nil || !strings.Contains(err.Error(), "exist in this data dir already") || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("import over existing sessions: %v", err)
	}
	mustRun(t, "import", "--data-dir", dst, "--replace", file)
	if out := mustRun(t, "verify", "--data-dir", dst); !strings.Contains(out, "consistent") {
		t.Fatalf("verify after import --replace: %s", out)
	}
	ts = startServer(t, dst)
	if got := answers(t, ts); got != want {
		t.Fatalf("after import --replace the data dir answers differently\nwant: %s\ngot:  %s", want, got)
	}
}

// An import into a data dir of another model embeds every message again,
// and the data dir then serves that model.
func TestAdminImportWithAnotherModelReembeds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	fake := fakeEmbeddings(t, &calls)
	src, dst := t.TempDir(), t.TempDir()
	ts := startServer(t, src)
	ids := ts.store("e", msg("user", "zebra zebra zoo"), msg("user", "apple banana"))
	ts.Stop()
	file := filepath.Join(t.TempDir(), "e.jsonl")
	mustRun(t, "export", "--data-dir", src, "--session", "e", "--vectors", "--out", file)

	out := mustRun(t, "import", "--data-dir", dst, "--embed-url", fake.URL+"/v1", "--embed-model", "fake-8d", file)
	if !strings.Contains(out, "2 embedded with openai:fake-8d") || calls.Load() == 0 {
		t.Fatalf("import with another model: %q, %d embedding calls", out, calls.Load())
	}
	ts = startServer(t, dst, func(c *Config) { c.EmbedURL, c.EmbedModel = fake.URL+"/v1", "fake-8d" })
	got := idsOf(ts.search(map[string]any{"query": "zebra zoo", "mode": "vector", "k": 1}))
	if len(got) != 1 || got[0] != ids[0] {
		t.Fatalf("vector search on the re-embedded import = %v, want %s", got, ids[0])
	}
}

// coldFile is a session's cold mirror file.
func coldFile(dir, session string) string {
	return filepath.Join(dir, "cold", memory.DefaultTenant, session+".jsonl.gz")
}

// readColdFile is what zcat prints for a cold mirror file.
func readColdFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
}

func TestAdminVerifyFindsAndRepairs(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	populate(t, ts)
	victim := ts.store("beta", msg("user", "the okapi question nobody asked"))[0]
	ts.Stop()
	if out := mustRun(t, "verify", "--data-dir", dir); !strings.Contains(out, "consistent") {
		t.Fatalf("verify of a fresh data dir: %s", out)
	}

	// Damage: a document deleted from the full-text index, a line missing
	// from one cold file, the last line of another cut short.
	idx, err := index.Open(filepath.Join(dir, "index"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wm, _ := idx.Watermark()
	if err := idx.Apply(context.Background(), memory.IndexBatch{Watermark: wm,
		Deletes: []*memory.Message{{ID: victim, Tenant: memory.DefaultTenant, SessionID: "beta"}}}); err != nil {
		t.Fatal(err)
	}
	idx.Close()
	lines := readLines(t, coldFile(dir, "alpha"))
	missing := lineID(t, lines[1])
	writeFile(t, coldFile(dir, "alpha"), strings.Join(append([]string{lines[0]}, lines[2:]...), ""))
	g := readLines(t, coldFile(dir, "gamma"))
	last := g[len(g)-1]
	writeFile(t, coldFile(dir, "gamma"), strings.Join(g[:len(g)-1], "")+last[:len(last)/2])

	out, _, err := runCtxd(t, "verify", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "inconsistencies remain") {
		t.Fatalf("verify of a damaged data dir exited cleanly: %v\n%s", err, out)
	}
	for _, want := range []string{"index_missing", victim, "cold_missing", missing, "cold_torn", "gamma", "4 inconsistencies"} {
		if !strings.Contains(out, want) {
			t.Errorf("verify output lacks %q:\n%s", want, out)
		}
	}
	jsonOut, _, err := runCtxd(t, "verify", "--data-dir", dir, "--json")
	var res verifyResult
	if err == nil || json.Unmarshal([]byte(jsonOut), &res) != nil || len(res.After.Findings) != 4 {
		t.Fatalf("verify --json: %v, %s", err, jsonOut)
	}

	out = mustRun(t, "verify", "--data-dir", dir, "--repair")
	if !strings.Contains(out, "repairing") || !strings.HasSuffix(strings.TrimSpace(out), "consistent") {
		t.Fatalf("verify --repair: %s", out)
	}
	if out := mustRun(t, "verify", "--data-dir", dir); !strings.Contains(out, "consistent") {
		t.Fatalf("verify after repair: %s", out)
	}
	if n := len(readLines(t, coldFile(dir, "gamma"))); n != len(g) {
		t.Fatalf("gamma's repaired cold file has %d lines, want %d", n, len(g))
	}
	ts = startServer(t, dir)
	if got := idsOf(ts.search(map[string]any{"query": "okapi", "mode": "text", "k": 1})); len(got) != 1 || got[0] != victim {
		t.Fatalf("search for the repaired document = %v", got)
	}
}

func TestAdminReindex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	populate(t, ts)
	want := answers(t, ts)
	ts.Stop()
	// A stray document the store never had: a rebuild must not keep it.
	idx, err := index.Open(filepath.Join(dir, "index"), index.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wm, _ := idx.Watermark()
	stray := &memory.Message{ID: "stray", Tenant: memory.DefaultTenant, SessionID: "beta", Role: memory.RoleUser,
		Content: "zebra migration", State: memory.StateActive}
	if err := idx.Apply(context.Background(), memory.IndexBatch{Watermark: wm, Upserts: []*memory.Message{stray}}); err != nil {
		t.Fatal(err)
	}
	idx.Close()

	out := mustRun(t, "reindex", "--data-dir", dir)
	if !strings.Contains(out, "reindexed") || !strings.Contains(out, "0 embedded") {
		t.Fatalf("reindex said %q", out)
	}
	if out := mustRun(t, "verify", "--data-dir", dir); !strings.Contains(out, "consistent") {
		t.Fatalf("verify after reindex: %s", out)
	}
	ts = startServer(t, dir)
	if got := answers(t, ts); got != want {
		t.Fatalf("after reindex the data dir answers differently\nwant: %s\ngot:  %s", want, got)
	}
}

// While a server holds the data dir every admin verb (and a second server)
// stops with a message saying so.
func TestAdminRefusesWhileServerRuns(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.store("s", msg("user", "hello"))
	file := filepath.Join(t.TempDir(), "x.jsonl")
	os.WriteFile(file, []byte(`{"type":"header","header":{"format":"ctxd-export","version":1}}`+"\n"), 0o600)
	want := "data dir " + dir + " is in use (is a ctxd server running? stop it first)"
	for _, args := range [][]string{{"verify"}, {"reindex"}, {"export", "--all", "--out", "-"}, {"import", file}} {
		_, _, err := runCtxd(t, append(args, "--data-dir", dir)...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ctxd %s while the server runs: %v", args[0], err)
		}
	}
	second := NewMain(testConfig(dir))
	if err := second.Run(context.Background(), nil); err == nil || !strings.Contains(err.Error(), want) {
		second.Close()
		t.Errorf("a second server on the same data dir: %v", err)
	}
	// The running server is untouched: the index was not removed under it.
	if got := idsOf(ts.search(map[string]any{"query": "hello", "mode": "text", "k": 1})); len(got) != 1 {
		t.Fatalf("search on the running server after refused admin verbs = %v", got)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	read := os.ReadFile
	if strings.HasSuffix(path, ".gz") {
		read = readColdFile
	}
	b, err := read(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	r := bufio.NewReader(bytes.NewReader(b))
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			out = append(out, line)
		}
		if err != nil {
			return out
		}
	}
}

func lineID(t *testing.T, line string) string {
	t.Helper()
	var c struct {
		ChunkID string `json:"chunk_id"`
	}
	if err := json.Unmarshal([]byte(line), &c); err != nil || c.ChunkID == "" {
		t.Fatalf("cold line %q: %v", line, err)
	}
	return c.ChunkID
}

// writeFile writes s to path, gzipped if path ends in .gz (a cold mirror
// file).
func writeFile(t *testing.T, path, s string) {
	t.Helper()
	b := []byte(s)
	if strings.HasSuffix(path, ".gz") {
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		z.Write(b)
		z.Close()
		b = buf.Bytes()
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
