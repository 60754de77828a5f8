package server_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/httpapi"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// The tests of the wire (*_wire_test.go) check the domain's rules through
// the server as composed: a request as a client sends it, the answer
// decoded into the api types a client reads.

// testServer is a real ctxd (store, indexes, tokenizer, HTTP) on loopback.
type testServer struct {
	t    testing.TB
	Main *server.Main
	URL  string
	Dir  string
	// Header is sent with every request (e.g. Authorization).
	Header http.Header
	// now is the server's clock (servertest pins its date).
	now func() time.Time
}

// startServer runs servertest's server on dir, with cold originals kept
// for the longest retention allowed (tests of retention set their own,
// thirtyDays), on PostgreSQL under TestCoreOnPostgres.
func startServer(t testing.TB, dir string, mutate ...func(*server.Config)) *testServer {
	t.Helper()
	cfg := servertest.Config(dir)
	cfg.Policy.RecoverableForDays = memory.MaxRecoverableForDays
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
	t.Cleanup(ts.Stop)
	return ts
}

// Stop closes the server, before its test ends to start another on its
// data dir; calling it twice is harmless.
func (ts *testServer) Stop() {
	if ts.Main != nil {
		if err := ts.Main.Close(); err != nil {
			ts.t.Errorf("close server: %v", err)
		}
		ts.Main = nil
	}
}

// thirtyDays is the default retention, for the tests that check it.
func thirtyDays(c *server.Config) {
	c.Policy.RecoverableForDays = memory.DefaultPolicy.RecoverableForDays
}

// resp is an answer as it came.
type resp struct {
	Status int
	Raw    []byte
}

// errBody is the error of an error answer (empty for another).
func (r resp) errBody() api.ErrorDetail {
	var e api.ErrorBody
	_ = json.Unmarshal(r.Raw, &e)
	return e.Error
}

// errCode is the code of an error answer ("" for another).
func (r resp) errCode() string { return r.errBody().Code }

func (ts *testServer) do(method, path string, body any) resp {
	ts.t.Helper()
	status, raw := servertest.Do(ts.t, method, ts.URL+path, ts.Header, body)
	return resp{Status: status, Raw: raw}
}

// call sends a request, fails the test unless the answer's status is want,
// and decodes the answer into out (when not nil).
func (ts *testServer) call(want int, method, path string, body, out any) {
	ts.t.Helper()
	r := ts.do(method, path, body)
	if r.Status != want {
		ts.t.Fatalf("%s %s = %d, want %d: %s", method, path, r.Status, want, r.Raw)
	}
	if out != nil {
		ts.decode(r, out)
	}
}

// decode decodes an answer into out, refusing unknown fields: a field the
// api types lack is a contract the test would not see.
func (ts *testServer) decode(r resp, out any) {
	ts.t.Helper()
	dec := json.NewDecoder(bytes.NewReader(r.Raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		ts.t.Fatalf("answer does not decode into %T: %v: %.300s", out, err, r.Raw)
	}
}

func msg(role, content string) api.MessageIn { return api.MessageIn{Role: role, Content: content} }

func (ts *testServer) append(session string, msgs ...api.MessageIn) *api.AppendOut {
	ts.t.Helper()
	var out api.AppendOut
	ts.call(201, "POST", "/v1/sessions/"+session+"/messages", api.AppendIn{Messages: msgs}, &out)
	return &out
}

func (ts *testServer) store(session string, msgs ...api.MessageIn) []string {
	ts.t.Helper()
	return ts.append(session, msgs...).IDs
}

func (ts *testServer) session(id string) *memory.Status {
	ts.t.Helper()
	var st memory.Status
	ts.call(200, "GET", "/v1/sessions/"+id, nil, &st)
	return &st
}

func (ts *testServer) putSession(id string, in map[string]any) *memory.Status {
	ts.t.Helper()
	var st memory.Status
	ts.call(200, "PUT", "/v1/sessions/"+id, in, &st)
	return &st
}

func (ts *testServer) context(session, query string, in api.ContextIn) *api.Context {
	ts.t.Helper()
	var w api.Context
	ts.call(200, "POST", "/v1/sessions/"+session+"/context"+query, in, &w)
	return &w
}

func (ts *testServer) search(in api.SearchIn) []api.SearchResult {
	ts.t.Helper()
	var out api.SearchOut
	ts.call(200, "POST", "/v1/search", in, &out)
	return out.Results
}

// allMessages is every message of session, in every state, oldest first.
func (ts *testServer) allMessages(session string) []api.Message {
	ts.t.Helper()
	return servertest.Messages(ts.t, ts.URL, ts.Header, session)
}

func (ts *testServer) cold(session, query string) []api.ColdChunk {
	ts.t.Helper()
	var out api.ColdList
	ts.call(200, "GET", "/v1/sessions/"+session+"/cold"+query, nil, &out)
	return out.Chunks
}

// chatter is filler in the shape of a real conversation turn.
var chatter = memorytest.Chatter

// turn is chatter(i) from the user on even turns, the assistant on odd.
func turn(i int) api.MessageIn {
	return msg([]string{"user", "assistant"}[i%2], chatter(i))
}

// readEvents reads a JSONL file of a data dir: an event log's stream
// (logs/STREAM.jsonl), read from the database for a server on PostgreSQL,
// or a cold mirror file. Events are maps on the wire too (api.Event): their
// fields depend on the stream.
func readEvents(t *testing.T, path string) []api.Event {
	t.Helper()
	if logs := filepath.Dir(path); filepath.Base(logs) == "logs" {
		if evs, ok := postgresEvents(t, filepath.Dir(logs), strings.TrimSuffix(filepath.Base(path), ".jsonl")); ok {
			return evs
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	var out []api.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m api.Event
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("%s: bad line %q: %v", path, sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// API keys of two tenants and of an admin, for startWithKeys.
const (
	keyA     = "key-of-tenant-a-0123456789"
	keyB     = "key-of-tenant-b-0123456789"
	keyAdmin = "key-of-the-admin-0123456789"
)

func startWithKeys(t *testing.T, mutate ...func(*server.Config)) *testServer {
	t.Helper()
	keys, err := httpapi.ParseKeys("a:" + keyA + ",b:" + keyB + ",*:" + keyAdmin)
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, t.TempDir(), append([]func(*server.Config){func(c *server.Config) { c.Keys = keys }}, mutate...)...)
}

// as returns a client of the same server that sends key (and, when given,
// acts as tenant).
func (ts *testServer) as(key string, tenant ...string) *testServer {
	c := *ts
	c.Header = http.Header{"Authorization": {"Bearer " + key}}
	if len(tenant) > 0 {
		c.Header.Set(api.TenantHeader, tenant[0])
	}
	return &c
}

// on returns a client of the same server that reports failures to t.
func (ts *testServer) on(t testing.TB) *testServer {
	c := *ts
	c.t = t
	return &c
}

// snapshot is everything the API shows of a session, to prove a refused
// request changed nothing.
func (ts *testServer) snapshot(session string) string {
	ts.t.Helper()
	st := ts.do("GET", "/v1/sessions/"+session, nil)
	var status map[string]any
	_ = json.Unmarshal(st.Raw, &status)
	delete(status, "updated_at")
	ms := ts.do("GET", "/v1/sessions/"+session+"/messages?state=all&limit=1000", nil)
	sessions := ts.do("GET", "/v1/sessions?limit=1000", nil)
	return fmt.Sprint(st.Status, status, ms.Status, string(ms.Raw), string(sessions.Raw))
}

func (ts *testServer) events(stream, session string) []api.Event {
	ts.t.Helper()
	var out api.EventList
	ts.call(200, "GET", "/v1/events/"+stream+"?session_id="+session, nil, &out)
	return out.Events
}

func (ts *testServer) message(id string) *api.Message {
	ts.t.Helper()
	return servertest.Message(ts.t, ts.URL, ts.Header, id)
}

func (ts *testServer) patch(id string, p any) *api.Message {
	ts.t.Helper()
	var m api.Message
	ts.call(200, "PATCH", "/v1/messages/"+id, p, &m)
	return &m
}

// checkCounters asserts the session status agrees with its messages: counts
// per state, summaries, and no id twice. It waits for background
// compactions first (queued behind the compaction bound).
func checkCounters(t *testing.T, ts *testServer, session string) []api.Message {
	t.Helper()
	if err := ts.Main.Service.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	msgs := ts.allMessages(session)
	servertest.CheckCounters(t, ts.session(session), msgs)
	return msgs
}

// checkTotals asserts the session's status agrees with its messages (counts,
// summaries, no id twice), that each message's tokens are its exact cost,
// and that the status's tokens are the sum over the working window (the
// sessions here hold no tool output long enough to be pruned). It returns
// the messages and what the pinned and system ones in the window cost.
func checkTotals(t *testing.T, ts *testServer, session string) ([]api.Message, int) {
	t.Helper()
	msgs := checkCounters(t, ts, session)
	return msgs, servertest.CheckTokens(t, ts.session(session), msgs)
}

// chat stores n turns of chatter, alternating user and assistant, four to a
// write: enough writes to compact, fewer requests than one per turn.
func chat(ts *testServer, session string, n int) {
	ts.t.Helper()
	for i := 0; i < n; i += 4 {
		var batch []api.MessageIn
		for j := i; j < min(i+4, n); j++ {
			batch = append(batch, turn(j))
		}
		ts.store(session, batch...)
	}
}

// readMirror reads a session's cold mirror file: gzip segments (members) of
// JSONL, one line a cold message.
func readMirror(t *testing.T, path string) []map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []map[string]any
	dec := json.NewDecoder(zr)
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("%s: bad line: %v", path, err)
		}
		out = append(out, m)
	}
	return out
}
