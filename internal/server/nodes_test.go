package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// rawNode starts a node on dsn and returns its URL.
func rawNode(t *testing.T, dsn string, mutate ...func(*server.Config)) string {
	t.Helper()
	url, _ := servertest.Start(t, t.TempDir(), append([]func(*server.Config){func(c *server.Config) { c.Store = dsn }}, mutate...)...)
	return url
}

// call sends a JSON request and returns the status and the decoded answer.
func call(t *testing.T, method, url string, body any, header ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out
}

// A caller's rate limit holds for the nodes together: with a burst of 3
// (and a refill of one request in 1,000 s), three requests on A leave
// none for B. Each node's own buckets would let it through once per node.
func TestTwoNodesShareRateLimits(t *testing.T) {
	dsn := pgtest.DSN(t)
	limited := func(c *server.Config) { c.RateLimit, c.RateBurst = 0.001, 3 }
	a, b := rawNode(t, dsn, limited), rawNode(t, dsn, limited)
	for i := range 3 {
		if code, body := call(t, "GET", a+"/v1/sessions", nil); code != 200 {
			t.Fatalf("request %d on A: %d %v", i+1, code, body)
		}
	}
	if code, body := call(t, "GET", b+"/v1/sessions", nil); code != 429 {
		t.Fatalf("the fourth request, on B: %d %v; want 429", code, body)
	}
	if code, _ := call(t, "GET", a+"/v1/sessions", nil); code != 429 {
		t.Fatalf("the fifth, on A again: %d; want 429", code)
	}
}

// An idempotency key used on A answers the retry on B with A's answer,
// and the messages are stored once.
func TestTwoNodesIdempotencyKey(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := rawNode(t, dsn), rawNode(t, dsn)
	body := map[string]any{"messages": []any{map[string]any{"role": "user", "content": "the heron waits at the weir"}}}
	codeA, first := call(t, "POST", a+"/v1/sessions/idem/messages", body, "Idempotency-Key", "k-1")
	codeB, retry := call(t, "POST", b+"/v1/sessions/idem/messages", body, "Idempotency-Key", "k-1")
	if codeA != 201 || codeB != 201 || !equalJSON(first["ids"], retry["ids"]) {
		t.Fatalf("on A: %d %v; the retry on B: %d %v", codeA, first, codeB, retry)
	}
	if _, list := call(t, "GET", b+"/v1/sessions/idem/messages", nil); len(list["messages"].([]any)) != 1 {
		t.Fatalf("stored %d messages, want 1: %v", len(list["messages"].([]any)), list)
	}
}

// A window B built (and keeps the layout of) does not outlive an edit
// made on A: B's next window has the edited text.
func TestTwoNodesEditSeenInWindow(t *testing.T) {
	dsn := pgtest.DSN(t)
	a, b := rawNode(t, dsn), rawNode(t, dsn)
	msgs := []any{
		map[string]any{"role": "user", "content": "the ferry leaves at seven"},
		map[string]any{"role": "assistant", "content": "noted, seven"},
	}
	_, stored := call(t, "POST", a+"/v1/sessions/edit/messages", map[string]any{"messages": msgs})
	id := stored["ids"].([]any)[0].(string)
	window := func(node string) string {
		t.Helper()
		code, w := call(t, "POST", node+"/v1/sessions/edit/context", map[string]any{"query": "ferry"})
		if code != 200 {
			t.Fatalf("context: %d %v", code, w)
		}
		b, _ := json.Marshal(w["messages"])
		return string(b)
	}
	if w := window(b); !strings.Contains(w, "leaves at seven") {
		t.Fatalf("B's first window: %s", w)
	}
	if code, body := call(t, "PATCH", a+"/v1/messages/"+id, map[string]any{"content": "the ferry leaves at nine"}); code != 200 {
		t.Fatalf("edit on A: %d %v", code, body)
	}
	if w := window(b); !strings.Contains(w, "leaves at nine") || strings.Contains(w, "leaves at seven") {
		t.Fatalf("B's window after A's edit: %s", w)
	}
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}
