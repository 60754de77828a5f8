package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// hostileCase is one bad (or barely valid) request and what it must answer.
// A 2xx want is for a read-only request at the edge of what is valid: it must
// not fail, and must not change anything either.
type hostileCase struct {
	name, method, path string
	body               any // nil, string or []byte (sent as is), or a value to marshal
	status             int
	code               string // "" for a 2xx
	// mention, when set, must appear in the error message: proof that the
	// request was refused for the reason the row is about.
	mention string
}

// hostileSeed is what seedHostile stored: ids the rows aim at.
type hostileSeed struct {
	coldID   string // a dropped or summarized message of session s
	activeID string // an active message of session s
	otherID  string // a message of session t
}

// seedHostile fills session s past compaction (so it holds every state) and
// session t with a tool-call group.
func seedHostile(t *testing.T, ts *testServer) hostileSeed {
	t.Helper()
	ts.mustDo(200, "PUT", "/v1/sessions/s", map[string]any{"context_window": 2000, "relevance_cutoff": 0.06,
		"metadata": map[string]any{"owner": "seed"}})
	ts.store("s", map[string]any{"role": "system", "content": "You are a careful assistant.", "pinned": true})
	for i := range 60 {
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		ts.store("s", map[string]any{"role": role, "content": chatter(i), "metadata": map[string]any{"turn": i}})
	}
	other := ts.store("t", msg("user", "list the files in /tmp"),
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "call_1",
			"type": "function", "function": map[string]any{"name": "ls", "arguments": `{"path":"/tmp"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"})
	var seed hostileSeed
	seed.otherID = other[0]
	for _, m := range allMessages(ts, "s") {
		switch m.State {
		case memory.StateDropped, memory.StateSummarized:
			if seed.coldID == "" && m.Kind != memory.KindSummary {
				seed.coldID = m.ID
			}
		case memory.StateActive:
			seed.activeID = m.ID
		}
	}
	if seed.coldID == "" || seed.activeID == "" {
		t.Fatalf("seed: no cold or no active message in s: %+v", seed)
	}
	return seed
}

// fullSnapshot is everything a client can see of the store: every session,
// every message of the seeded sessions in every state, the cold listing, and
// a search across sessions. A refused request must leave it byte for byte.
// The search shows what it finds (each result but its score): the index's
// own background merges of segments move BM25 scores in their last digits
// (0.39383 to 0.39457 for one hit, no request made), which is not data.
func (ts *testServer) fullSnapshot(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/sessions?limit=1000", ""},
		{"GET", "/v1/sessions/s/messages?state=all&limit=1000", ""},
		{"GET", "/v1/sessions/t/messages?state=all&limit=1000", ""},
		{"GET", "/v1/sessions/s/cold?limit=1000", ""},
		{"POST", "/v1/search", `{"query":"train late river files tmp","k":30}`},
	} {
		res := hostileDo(t, ts, r.method, r.path, r.body, nil)
		raw := res.Raw
		if r.path == "/v1/search" && res.Status == 200 {
			var out struct{ Results []map[string]any }
			if err := json.Unmarshal(raw, &out); err != nil {
				t.Fatalf("search: %v", err)
			}
			// Scores are not stored state: BM25's move when the index
			// merges its segments in the background.
			for _, hit := range out.Results {
				delete(hit, "score")
				delete(hit, "score_parts")
			}
			raw, _ = json.Marshal(out.Results)
		}
		fmt.Fprintf(&b, "%s %s %d %s\n", r.method, r.path, res.Status, raw)
	}
	return b.String()
}

// stableSnapshot waits out work a seeding write may have left running
// (background compactions, index catch-ups) through the service, then
// snapshots. Two equal snapshots 50 ms apart did not show it was done: on
// a busy machine a compaction outlasted them and changed the store under
// the first hostile request.
func (ts *testServer) stableSnapshot(t testing.TB) string {
	t.Helper()
	if err := ts.Main.Service.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ts.fullSnapshot(t)
}

// hostileDo sends one request; body as hostileCase.body. It fails t (not
// the server's test) on transport errors.
func hostileDo(t testing.TB, ts *testServer, method, path string, body any, header http.Header) resp {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		if b != "" {
			rd = strings.NewReader(b)
		}
	default:
		js, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(js)
	}
	req, err := http.NewRequest(method, ts.URL+path, rd)
	if err != nil {
		t.Fatalf("build %s %s: %v", method, path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	out := resp{Status: res.StatusCode, Raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %v: %.300s", method, path, err, raw)
		}
	}
	return out
}

// checkErrorShape asserts API.md's error body: {"error":{"code","message"}}.
func checkErrorShape(t testing.TB, r resp) string {
	t.Helper()
	e, ok := r.Body["error"].(map[string]any)
	if !ok || len(r.Body) != 1 {
		t.Fatalf("%d answer is not {\"error\":{...}}: %.300s", r.Status, r.Raw)
	}
	code, _ := e["code"].(string)
	message, _ := e["message"].(string)
	if code == "" || message == "" || len(e) != 2 {
		t.Fatalf("error without code or message: %.300s", r.Raw)
	}
	return message
}

// hole marks where spliceJSON puts raw JSON text.
const hole = "\x01hole\x01"

// spliceJSON returns base as JSON with the value at path (dot-separated keys
// and indexes, "messages.0.role") replaced by raw, which need not be of the
// field's type or even valid JSON.
func spliceJSON(base any, path, raw string) string {
	var v any
	js, _ := json.Marshal(base)
	_ = json.Unmarshal(js, &v)
	v = setPath(v, strings.Split(path, "."), hole)
	js, _ = json.Marshal(v)
	marker, _ := json.Marshal(hole)
	if !bytes.Contains(js, marker) {
		panic("spliceJSON: no " + path + " in base")
	}
	return string(bytes.Replace(js, marker, []byte(raw), 1))
}

func setPath(v any, path []string, x any) any {
	if len(path) == 0 {
		return x
	}
	switch c := v.(type) {
	case map[string]any:
		c[path[0]] = setPath(c[path[0]], path[1:], x)
		return c
	case []any:
		i, err := strconv.Atoi(path[0])
		if err != nil || i >= len(c) {
			panic("setPath: bad index " + path[0])
		}
		c[i] = setPath(c[i], path[1:], x)
		return c
	case nil:
		return setPath(map[string]any{}, path, x)
	}
	panic(fmt.Sprintf("setPath: %T has no field %s", v, path[0]))
}
