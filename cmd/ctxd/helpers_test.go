package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// testServer is a real ctxd (store, indexes, tokenizer, HTTP) on loopback.
type testServer struct {
	t    testing.TB
	Main *Main
	URL  string
	Dir  string
	// Header is sent with every request (e.g. Authorization).
	Header http.Header
	// now is the server's clock (servertest pins its date).
	now func() time.Time
}

// testConfig is servertest's, with cold originals kept for the longest
// retention allowed: test servers write at servertest.Epoch, and the real
// binaries the crash and damage tests start on their data dirs read the
// real clock, at which 30 days after Epoch has long passed: a start purges
// what has expired, so the default retention would purge every cold
// original they check. Tests of retention set their own.
func testConfig(dir string) Config {
	cfg := servertest.Config(dir)
	cfg.Policy.RecoverableForDays = memory.MaxRecoverableForDays
	return cfg
}

// thirtyDays is the default retention, for the tests that check it.
func thirtyDays(c *Config) { c.Policy.RecoverableForDays = memory.DefaultPolicy.RecoverableForDays }

func startServer(t testing.TB, dir string, mutate ...func(*Config)) *testServer {
	t.Helper()
	cfg := testConfig(dir)
	for _, f := range mutate {
		f(&cfg)
	}
	pg := servertest.PostgresFor(t, cfg.DataDir)
	if pg != "" {
		cfg.Store = pg
	}
	m, err := servertest.Run(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start server: %v", err)
	}
	if pg != "" {
		servertest.CheckOnPostgres(t, cfg.DataDir)
	}
	ts := &testServer{t: t, Main: m, URL: "http://" + m.Addr.String(), Dir: dir, now: cfg.Clock}
	t.Cleanup(func() { ts.Stop() })
	return ts
}

// as returns a client of the same server that sends key (and, when given,
// acts as tenant).
func (ts *testServer) as(key string, tenant ...string) *testServer {
	c := *ts
	c.Header = http.Header{"Authorization": {"Bearer " + key}}
	if len(tenant) > 0 {
		c.Header.Set("X-Ctxd-Tenant", tenant[0])
	}
	return &c
}

// on returns a client of the same server that reports failures to t.
func (ts *testServer) on(t testing.TB) *testServer {
	c := *ts
	c.t = t
	return &c
}

// Stop closes the server; calling it twice is harmless.
func (ts *testServer) Stop() {
	if ts.Main != nil {
		if err := ts.Main.Close(); err != nil {
			ts.t.Errorf("close server: %v", err)
		}
		ts.Main = nil
	}
}

type resp struct {
	Status int
	Body   map[string]any
	Raw    []byte
}

func (r resp) errCode() string {
	e, _ := r.Body["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

func (ts *testServer) do(method, path string, body any) resp {
	ts.t.Helper()
	status, raw := servertest.Do(ts.t, method, ts.URL+path, ts.Header, body)
	out := resp{Status: status, Raw: raw}
	if len(raw) > 0 && raw[0] == '{' {
		if err := json.Unmarshal(raw, &out.Body); err != nil {
			ts.t.Fatalf("%s %s: answer is not JSON: %v: %s", method, path, err, raw)
		}
	}
	return out
}

func (ts *testServer) mustDo(want int, method, path string, body any) map[string]any {
	ts.t.Helper()
	r := ts.do(method, path, body)
	if r.Status != want {
		ts.t.Fatalf("%s %s = %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	return r.Body
}

// call sends a request, fails the test unless the answer's status is want,
// and decodes the answer into out (when not nil), refusing unknown fields:
// a field the api types lack is a contract the test would not see.
func (ts *testServer) call(want int, method, path string, body, out any) {
	ts.t.Helper()
	r := ts.do(method, path, body)
	if r.Status != want {
		ts.t.Fatalf("%s %s = %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	if out == nil {
		return
	}
	dec := json.NewDecoder(bytes.NewReader(r.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		ts.t.Fatalf("%s %s: answer does not decode into %T: %v: %.300s", method, path, out, err, r.Raw)
	}
}

// message is GET /v1/messages/{id}.
func (ts *testServer) message(id string) *api.Message {
	ts.t.Helper()
	return servertest.Message(ts.t, ts.URL, ts.Header, id)
}

// window is POST /v1/sessions/{session}/context.
func (ts *testServer) window(session string, in any) *api.Context {
	ts.t.Helper()
	var w api.Context
	ts.call(200, "POST", "/v1/sessions/"+session+"/context", in, &w)
	return &w
}

func msg(role, content string) map[string]any {
	return map[string]any{"role": role, "content": content}
}

func (ts *testServer) store(session string, msgs ...map[string]any) []string {
	ts.t.Helper()
	body := ts.mustDo(201, "POST", "/v1/sessions/"+session+"/messages", map[string]any{"messages": msgs})
	var ids []string
	for _, id := range body["ids"].([]any) {
		ids = append(ids, id.(string))
	}
	return ids
}

func (ts *testServer) search(req map[string]any) []api.SearchResult {
	ts.t.Helper()
	var out api.SearchOut
	ts.call(200, "POST", "/v1/search", req, &out)
	return out.Results
}

func idsOf(results []api.SearchResult) []string {
	var out []string
	for _, r := range results {
		out = append(out, r.ID)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// snapshot is everything the API shows of a session, to prove a refused
// request changed nothing.
func (ts *testServer) snapshot(session string) string {
	ts.t.Helper()
	st := ts.do("GET", "/v1/sessions/"+session, nil)
	ms := ts.do("GET", "/v1/sessions/"+session+"/messages?state=all&limit=1000", nil)
	sessions := ts.do("GET", "/v1/sessions?limit=1000", nil)
	delete(st.Body, "updated_at")
	return fmt.Sprint(st.Status, st.Body, ms.Status, ms.Body, sessions.Body)
}
