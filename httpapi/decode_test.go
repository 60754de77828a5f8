package httpapi

import (
	"fmt"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// A path segment is decoded once: %2573 is the id "%73" (invalid), not "s".
func TestPathParamDecodedOnce(t *testing.T) {
	s := testServer(t)
	for _, c := range []struct {
		method, target string
		status         int
	}{
		{"GET", "/v1/sessions/%2573", 400},
		{"DELETE", "/v1/sessions/%2573", 400},
		{"GET", "/v1/sessions/%2573/messages", 400},
		{"POST", "/v1/sessions/%2573/compact", 400},
		{"GET", "/v1/sessions/%25", 400},
		{"GET", "/v1/sessions/a%252Fb", 400},
		{"GET", "/v1/sessions/a%2Fb", 400},
		{"GET", "/v1/sessions/%73", 200}, // an escape of a plain character still names s
		{"GET", "/v1/sessions/s", 200},
		{"POST", "/v1/sessions/s/messages/%25" + fmt.Sprintf("%X", shared.cold[0]) + shared.cold[1:] + "/recover", 404},
	} {
		a := serve(t, s, c.method, c.target, nil)
		checkAnswer(t, a)
		if a.status != c.status {
			t.Errorf("%s %s = %d, want %d: %s", c.method, c.target, a.status, c.status, a.raw)
		}
	}
	if a := serve(t, s, "GET", "/v1/sessions/s/messages?state=all&limit=1000", nil); a.status != 200 || len(a.body["messages"].([]any)) == 0 {
		t.Fatalf("session s lost its messages: %d %.200s", a.status, a.raw)
	}
}

// A body that is JSON but not an object is refused: Go would decode null
// into a request with no fields set, which compacts or resets by default.
func TestBodyMustBeAnObject(t *testing.T) {
	s := testServer(t)
	for _, target := range []string{"PUT /v1/sessions/s", "POST /v1/sessions/s/compact", "POST /v1/sessions/s/context",
		"POST /v1/search", "POST /v1/sessions/s/messages"} {
		method, path, _ := strings.Cut(target, " ")
		for _, body := range []string{"null", " null ", "[]", `"x"`, "1", "true"} {
			a := serve(t, s, method, path, []byte(body))
			checkAnswer(t, a)
			if a.status != 400 {
				t.Errorf("%s body %s = %d, want 400: %s", target, body, a.status, a.raw)
			}
		}
	}
}

func TestLoneSurrogate(t *testing.T) {
	for body, lone := range map[string]bool{
		`{"a":"\ud800"}`:                   true,
		`{"a":"\uDBFF"}`:                   true,
		`{"a":"\udc00"}`:                   true,
		`{"a":"\ud800x"}`:                  true,
		`{"a":"\ud800\u0041"}`:             true,
		`{"a":"\ud800\ud800\udc00"}`:       true,
		`{"a":"\udc00\ud800"}`:             true,
		`{"\ud83d":1}`:                     true,
		`{"a":"x\ud83d\ude00y"}`:           false,
		`{"a":"\ud83d\ude00\ud83d\ude00"}`: false,
		`{"a":"\\ud800"}`:                  false, // an escaped backslash, then text
		`{"a":"\\\ud83d\ude00"}`:           false,
		`{"a":"\\\ud800"}`:                 true,
		`{"a":"\u00e9\u0000"}`:             false,
		`{"a":"\ud800`:                     true,
		`\`:                                false,
	} {
		if got := loneSurrogate([]byte(body)); got != lone {
			t.Errorf("loneSurrogate(%s) = %v, want %v", body, got, lone)
		}
	}
	s := testServer(t)
	a := serve(t, s, "POST", "/v1/sessions/s/messages", []byte(`{"messages":[{"role":"user","content":"half \ud83d a smile"}]}`))
	if checkAnswer(t, a); a.status != 400 || !strings.Contains(fmt.Sprint(a.body), "surrogate") {
		t.Fatalf("lone surrogate = %d %s, want 400 naming it", a.status, a.raw)
	}
	a = serve(t, s, "POST", "/v1/sessions/smile/messages", []byte(`{"messages":[{"role":"user","content":"a whole \ud83d\ude00 smile"}]}`))
	if a.status != 201 {
		t.Fatalf("surrogate pair = %d %s, want 201", a.status, a.raw)
	}
	a = serve(t, s, "GET", "/v1/sessions/smile/messages", nil)
	if got := a.body["messages"].([]any)[0].(map[string]any)["content"]; got != "a whole \U0001F600 smile" {
		t.Fatalf("stored %q", got)
	}
}

// endless is an unending JSON body that counts the bytes read from it.
type endless struct {
	head string
	n    atomic.Int64
}

func (e *endless) Read(p []byte) (int, error) {
	off := e.n.Load()
	for i := range p {
		if j := off + int64(i); j < int64(len(e.head)) {
			p[i] = e.head[j]
		} else {
			p[i] = 'a'
		}
	}
	e.n.Add(int64(len(p)))
	return len(p), nil
}

// An oversized body is refused without being read: from its declared length
// before a byte is read, and after the limit when no length is declared.
func TestBodyLimitStopsReading(t *testing.T) {
	testServer(t)
	const limit = 64 << 10
	s := New(shared.svc, Options{BodyLimit: limit, Logger: slog.New(slog.DiscardHandler)})
	for _, route := range []struct{ method, target, head string }{
		{"PUT", "/v1/sessions/big", `{"metadata":{"k":"`},
		{"POST", "/v1/sessions/big/messages", `{"messages":[{"role":"user","content":"`},
		{"POST", "/v1/search", `{"query":"`},
		{"POST", "/v1/sessions/s/compact", `{"prompt":"`},
		{"POST", "/v1/sessions/s/context", `{"prompt":"`},
	} {
		for _, declared := range []int64{1 << 30, -1} {
			body := &endless{head: route.head}
			req := httptest.NewRequest(route.method, route.target, io.Reader(body))
			req.ContentLength = declared
			a := serveRequest(t, s, req)
			checkAnswer(t, a)
			read := body.n.Load()
			switch {
			case declared > 0 && (a.status != 413 || read != 0):
				t.Errorf("%s %s with 1 GiB declared = %d after reading %d bytes, want 413 before reading", route.method, route.target, a.status, read)
			case declared < 0 && read > limit+1:
				t.Errorf("%s %s read %d bytes of an undeclared body, limit %d", route.method, route.target, read, limit)
			case declared < 0 && read > 0 && a.status != 413:
				t.Errorf("%s %s undeclared body = %d, want 413", route.method, route.target, a.status)
			}
		}
	}
	// Recover takes no body: it reads none, whatever the size declared.
	for _, declared := range []int64{1 << 30, -1} {
		body := &endless{head: `{"x":"`}
		req := httptest.NewRequest("POST", "/v1/sessions/s/messages/"+shared.cold+"/recover", io.Reader(body))
		req.ContentLength = declared
		a := serveRequest(t, s, req)
		checkAnswer(t, a)
		if read := body.n.Load(); read != 0 || a.status != 200 {
			t.Errorf("recover with a %d-byte body = %d after reading %d bytes, want 200 reading nothing", declared, a.status, read)
		}
	}
	if a := serve(t, s, "GET", "/v1/sessions/big", nil); a.status != 404 {
		t.Fatalf("an oversized body created session big: %d %s", a.status, a.raw)
	}
}

// One JSON rule on every route: what Go's decoder would read as something
// other than what was sent is refused, nothing stored. A duplicate member
// took the last value ("role" twice stored a system message), an unknown
// field on append was ignored while PATCH refused it, and the zero
// created_at was stored as the time of storing.
func TestOneJSONRule(t *testing.T) {
	s := testServer(t)
	before := serve(t, s, "GET", "/v1/sessions/s", nil)
	for _, c := range []struct{ target, body, want string }{
		{"POST /v1/sessions/s/messages", `{"messages":[{"role":"user","role":"system","content":"x"}]}`, `duplicate member "role"`},
		{"POST /v1/sessions/s/messages", `{"messages":[{"role":"user","content":"x"}],"messages":[]}`, `duplicate member "messages"`},
		{"POST /v1/sessions/s/messages", `{"messages":[{"role":"user","content":"x","metadata":{"k":1,"k":2}}]}`, `duplicate member "k"`},
		{"POST /v1/sessions/s/messages", `{"messages":[{"role":"user","content":"x","pined":true}]}`, `unknown field "pined"`},
		{"POST /v1/sessions/s/messages", `{"messages":[{"role":"user","content":"x"}],"sesion":"t"}`, `unknown field "sesion"`},
		{"POST /v1/sessions/s/messages", `{"messages":[{"role":"user","content":"x","created_at":"0001-01-01T00:00:00Z"}]}`, "zero time"},
		{"POST /v1/search", `{"query":"x","query":"y"}`, `duplicate member "query"`},
		{"PUT /v1/sessions/s", `{"context_window":9000,"context_window":8000}`, `duplicate member "context_window"`},
		{"PATCH /v1/messages/" + shared.cold, `{"pinned":true,"pinned":false}`, `duplicate member "pinned"`},
	} {
		method, path, _ := strings.Cut(c.target, " ")
		a := serve(t, s, method, path, []byte(c.body))
		checkAnswer(t, a)
		if a.status != 400 || !strings.Contains(strings.ReplaceAll(string(a.raw), `\"`, `"`), c.want) {
			t.Errorf("%s %s = %d %s, want 400 naming %s", c.target, c.body, a.status, a.raw, c.want)
		}
	}
	if after := serve(t, s, "GET", "/v1/sessions/s", nil); string(after.raw) != string(before.raw) {
		t.Errorf("a refused write changed the session:\n%s\n%s", before.raw, after.raw)
	}
	// The same members once each are taken.
	if a := serve(t, s, "POST", "/v1/sessions/one-rule/messages", []byte(`{"messages":[{"role":"user","content":"x","metadata":{"k":{"a":1}.a}}]}`)); a.status != 400 {
		t.Errorf("malformed JSON = %d", a.status)
	}
	if a := serve(t, s, "POST", "/v1/sessions/one-rule/messages", []byte(`{"messages":[{"role":"user","content":"x","metadata":{"k":1,"j":2},"created_at":"2026-01-02T03:04:05Z"}]}`)); a.status != 201 {
		t.Errorf("a valid write = %d %s", a.status, a.raw)
	}
}

// A tool structure no window can carry is refused at write: two calls of
// one message with one id, two results for one call. A result answers the
// latest call with its id, so ids a model numbers again on every turn pass.
func TestToolStructureRefused(t *testing.T) {
	s := testServer(t)
	call := func(id string) string {
		return `{"id":"` + id + `","type":"function","function":{"name":"f","arguments":"{}"}}`
	}
	for _, c := range []struct {
		body   string
		status int
	}{
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[` + call("c1") + `,` + call("c1") + `]}]}`, 400},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[` + call("c1") + `]},{"role":"tool","tool_call_id":"c1","content":"a"},{"role":"tool","tool_call_id":"c1","content":"b"}]}`, 400},
		{`{"messages":[{"role":"tool","tool_call_id":"c9","content":"a"},{"role":"tool","tool_call_id":"c9","content":"b"}]}`, 400},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[` + call("call_0") + `]},{"role":"tool","tool_call_id":"call_0","content":"a"},` +
			`{"role":"assistant","content":"","tool_calls":[` + call("call_0") + `]},{"role":"tool","tool_call_id":"call_0","content":"b"}]}`, 201},
	} {
		a := serve(t, s, "POST", "/v1/sessions/tools-refused/messages", []byte(c.body))
		checkAnswer(t, a)
		if a.status != c.status {
			t.Errorf("%s = %d %s, want %d", c.body, a.status, a.raw, c.status)
		}
	}
	// Across writes: a result for a call an earlier write answered is
	// refused and stores nothing; a result for a call numbered again
	// after it passes.
	for i, c := range []struct {
		body   string
		status int
	}{
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[` + call("x1") + `]}]}`, 201},
		{`{"messages":[{"role":"tool","tool_call_id":"x1","content":"first"}]}`, 201},
		{`{"messages":[{"role":"user","content":"go on"}]}`, 201},
		{`{"messages":[{"role":"user","content":"unstored"},{"role":"tool","tool_call_id":"x1","content":"second"}]}`, 400},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[` + call("x1") + `]}]}`, 201},
		{`{"messages":[{"role":"tool","tool_call_id":"x1","content":"again"}]}`, 201},
	} {
		a := serve(t, s, "POST", "/v1/sessions/tools-across/messages", []byte(c.body))
		checkAnswer(t, a)
		if a.status != c.status {
			t.Errorf("write %d: %s = %d %s, want %d", i, c.body, a.status, a.raw, c.status)
		}
	}
	if a := serve(t, s, "GET", "/v1/sessions/tools-across/messages", nil); a.status != 200 || strings.Contains(string(a.raw), "unstored") || strings.Count(string(a.raw), `"tool_call_id":"x1"`) != 2 {
		t.Errorf("after the refused write: %d %s", a.status, a.raw)
	}
}
