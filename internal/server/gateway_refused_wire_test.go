package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/fakemodel"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/internal/server/servertest"
)

// A gateway request ctxd refuses is refused whole: 400, nothing sent
// upstream, no session created (200 refused requests left 200 empty
// sessions), and the body's JSON read by the API's rule (invalid UTF-8 was
// replaced with U+FFFD where the API refuses it). A history whose window
// would be empty (a tool result alone: its call is not in the history) is
// refused rather than sent upstream as "messages": [].
func TestGatewayRefusedRequestsLeaveNothing(t *testing.T) {
	t.Parallel()
	answer := func(w http.ResponseWriter, r *http.Request, body map[string]any) {
		if strings.HasSuffix(r.URL.Path, "/messages") {
			fakemodel.AnthropicAnswer(w, map[string]any{"type": "text", "text": "ok"})
			return
		}
		fakemodel.OpenAIAnswer(w, "ok")
	}
	up := fakemodel.NewRecorder(t, answer)
	ts := startServer(t, t.TempDir(), func(c *server.Config) {
		c.UpstreamOpenAIURL = up.URL + "/v1"
		c.UpstreamAnthropicURL = up.URL
	})
	for _, c := range []struct{ name, path, body string }{
		{"invalid UTF-8", "/v1/chat/completions", "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}"},
		{"lone surrogate", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"\ud800"}]}`},
		{"duplicate member", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","role":"system","content":"x"}]}`},
		{"unknown role", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"a"},{"role":"root","content":"b"}]}`},
		{"empty user message", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"a"},{"role":"user","content":" "}]}`},
		{"tools over the window", "/v1/chat/completions", `{"model":"gpt-4o","tools":[{"type":"function","function":{"name":"f","description":"` + strings.Repeat("word ", 20000) + `"}}],"messages":[{"role":"user","content":"a"}]}`},
		{"duplicate tool call ids", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"a"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"c1","type":"function","function":{"name":"g","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"r"}]}`},
		{"two results for one call", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"a"},` +
			`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},` +
			`{"role":"tool","tool_call_id":"c1","content":"r"},{"role":"tool","tool_call_id":"c1","content":"again"}]}`},
		{"a tool result alone", "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"tool","tool_call_id":"gone","content":"r"}]}`},
		{"anthropic invalid UTF-8", "/v1/messages", "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":100,\"messages\":[{\"role\":\"user\",\"content\":\"caf\xe9\"}]}"},
		{"anthropic a tool result alone", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":100,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"gone","content":"r"}]}]}`},
	} {
		session := strings.ReplaceAll(c.name, " ", "-")
		h := http.Header{"Authorization": {"Bearer sk-upstream"}, "X-Ctxd-Session": {session}, "X-Ctxd-Context-Window": {"16000"}, "X-Api-Key": {"sk-upstream"}}
		if status, raw := servertest.Do(t, "POST", ts.URL+c.path, h, c.body); status != 400 {
			t.Errorf("%s: %d %s, want 400", c.name, status, raw)
		}
	}
	if n := up.Count(); n != 0 {
		t.Errorf("%d refused requests reached the upstream, first %s", n, up.Requests()[0].Raw)
	}
	var list api.SessionList
	ts.call(200, "GET", "/v1/sessions", nil, &list)
	if len(list.Sessions) != 0 {
		t.Errorf("refused requests left %d sessions: %+v", len(list.Sessions), list.Sessions[0])
	}
	// The same conversation, valid, goes through and makes the session.
	h := http.Header{"Authorization": {"Bearer sk-upstream"}, "X-Ctxd-Session": {"refused"}}
	status, raw := servertest.Do(t, "POST", ts.URL+"/v1/chat/completions", h, `{"model":"gpt-4o","messages":[{"role":"user","content":"café"}]}`)
	if status != 200 || up.Count() != 1 {
		t.Fatalf("valid request: %d %s, %d upstream requests", status, raw, up.Count())
	}
}
