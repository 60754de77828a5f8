package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/ctxd/ctxd/summarize"
	"github.com/ctxd/ctxd/tokenizer"
)

// The tests and fuzz targets of this package share one real service (bbolt,
// Bleve, GloVe, tiktoken, extractive summaries) on a temp dir, built once
// per process: a fuzz worker runs thousands of inputs against it.
var shared struct {
	once  sync.Once
	dir   string
	store *boltstore.Store
	idx   *index.Index
	svc   *memory.Service
	srv   *Server
	cold  string // id of a dropped or summarized message of session "s"
	err   error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.svc != nil {
		_ = shared.svc.Close()
		_ = shared.idx.Close()
		_ = shared.store.Close()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// testServer returns the shared server, with session "s" seeded past a
// compaction so it holds messages in every state.
func testServer(tb testing.TB) *Server {
	tb.Helper()
	shared.once.Do(func() { shared.err = openShared() })
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.srv
}

func openShared() (err error) {
	if shared.dir, err = os.MkdirTemp("", "ctxd-httpapi-"); err != nil {
		return err
	}
	if shared.store, err = boltstore.Open(filepath.Join(shared.dir, "ctxd.db"), false); err != nil {
		return err
	}
	if shared.idx, err = index.Open(filepath.Join(shared.dir, "index"), index.Options{}); err != nil {
		return err
	}
	emb, err := glove.Default()
	if err != nil {
		return err
	}
	tok := tokenizer.New()
	log := slog.New(slog.DiscardHandler)
	// The clock starts at a pinned date (servertest.Epoch's) and runs with
	// the real one: no result may depend on the day the tests run.
	epoch, origin := time.Date(2025, time.January, 15, 9, 30, 0, 0, time.UTC), time.Now()
	shared.svc = &memory.Service{Store: shared.store, Index: shared.idx, Embedder: emb, Tokenizer: tok,
		Summarizer: summarize.NewExtractive(tok, emb), Logger: log,
		Now: func() time.Time { return epoch.Add(time.Since(origin)) }}
	ctx := context.Background()
	if err := shared.svc.Open(ctx); err != nil {
		return fmt.Errorf("open service: %w", err)
	}
	shared.srv = New(shared.svc, Options{Logger: log})
	return seed(ctx)
}

func seed(ctx context.Context) error {
	window := 2000
	if _, err := shared.svc.PutSession(ctx, "s", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		return err
	}
	for i := range 60 {
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		m := &memory.Message{Role: role, Content: fmt.Sprintf("turn %d: the train ran late, so we walked along the river and talked about film %d", i, i*7)}
		if _, err := shared.svc.Append(ctx, "s", []*memory.Message{m}); err != nil {
			return err
		}
	}
	msgs, _, err := shared.svc.ListMessages(ctx, "s", []string{"dropped", "summarized"}, "", 1)
	if err != nil || len(msgs) == 0 {
		return fmt.Errorf("seed: no cold message in s (%v)", err)
	}
	shared.cold = msgs[0].ID
	return nil
}

// answer is one response, decoded.
type answer struct {
	status int
	body   map[string]any
	raw    []byte
}

// serve sends one request straight to the handler. target is a request URI
// as a client writes it, escapes included.
func serve(tb testing.TB, s *Server, method, target string, body []byte) answer {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req := httptest.NewRequest(method, target, rd)
	req.Header.Set("Content-Type", "application/json")
	return serveRequest(tb, s, req)
}

func serveRequest(tb testing.TB, s *Server, req *http.Request) answer {
	tb.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	a := answer{status: rec.Code, raw: rec.Body.Bytes()}
	if len(a.raw) > 0 {
		if err := json.Unmarshal(a.raw, &a.body); err != nil {
			tb.Fatalf("%s %s: answer is not a JSON object: %v: %.300s", req.Method, req.URL, err, a.raw)
		}
	}
	return a
}

// statusOfCode is API.md's table, read the other way.
var statusOfCode = map[string]int{
	"invalid_request": 400, "unauthorized": 401, "forbidden": 403, "not_found": 404, "method_not_allowed": 405,
	"conflict": 409, "too_large": 413, "rate_limited": 429, "unavailable": 503,
}

// checkAnswer asserts what any answer to any input must be: not a 5xx (a
// bug, or an input that reached a dependency unchecked), and an error in
// API.md's shape with the code its status stands for.
func checkAnswer(tb testing.TB, a answer) {
	tb.Helper()
	if a.status >= 500 {
		tb.Fatalf("status %d: %.500s", a.status, a.raw)
	}
	if a.status < 400 {
		return
	}
	e, ok := a.body["error"].(map[string]any)
	if !ok || len(a.body) != 1 || len(e) != 2 {
		tb.Fatalf("status %d without the error shape: %.300s", a.status, a.raw)
	}
	code, _ := e["code"].(string)
	msg, _ := e["message"].(string)
	if msg == "" || statusOfCode[code] != a.status {
		tb.Fatalf("status %d with code %q, message %q", a.status, code, msg)
	}
}
