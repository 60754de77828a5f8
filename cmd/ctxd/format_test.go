package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// A tool result may be empty (a command that printed nothing): it is
// stored with its exact cost, embedded, indexed, summarized and sent in
// windows like any other; other roles still need content.
func TestEmptyToolResults(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.mustDo(200, "PUT", "/v1/sessions/t", map[string]any{"context_window": 1500})
	ids := ts.store("t", msg("user", "make the build directory"),
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": "mk", "function": map[string]any{"name": "mkdir", "arguments": `{"path":"build"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "mk", "content": ""},
		msg("assistant", "Created build/."))
	if empty := ts.message(ids[2]); empty.Content != "" || empty.Role != memory.RoleTool {
		t.Fatalf("empty tool result = %+v", empty)
	}
	checkTotals(t, ts, "t")
	for _, role := range []string{"user", "assistant", "system"} {
		r := ts.do("POST", "/v1/sessions/t/messages", map[string]any{"messages": []any{msg(role, "")}})
		if r.Status != 400 || !strings.Contains(string(r.Raw), "content") {
			t.Fatalf("empty %s message = %d %s", role, r.Status, r.Raw)
		}
	}
	for _, mode := range []string{"hybrid", "text", "vector"} {
		ts.search(map[string]any{"query": "make the build directory", "session_id": "t", "mode": mode})
	}
	w := ts.window("t", map[string]any{"prompt": "did mkdir work?"})
	servertest.CheckSequence(t, w.Messages)
	if got := w.Messages[2]; got.Content != "" || got.ToolCallID != "mk" {
		t.Fatalf("window's third message = %+v", got)
	}

	// Many silent commands: compactions summarize and drop them.
	for i := range 40 {
		ts.store("t", append([]map[string]any{msg("user", chatter(i))}, toolTurn(i, "")...)...)
	}
	if st := servertest.Status(t, ts.URL, ts.Header, "t"); st.Compactions < 1 || st.Summaries < 1 {
		t.Fatalf("no compaction with summaries: %+v", st)
	}
	coldEmpty := 0
	for _, m := range allMessages(ts, "t") {
		if m.Role == memory.RoleTool && m.Content == "" && m.State != memory.StateActive {
			coldEmpty++
		}
	}
	if coldEmpty == 0 {
		t.Fatal("no empty tool result went cold")
	}
	w = ts.window("t", map[string]any{"prompt": "which directories were made?", "max_tokens": 800})
	servertest.CheckSequence(t, w.Messages)
	ts.mustDo(200, "PATCH", "/v1/messages/"+ids[2], map[string]any{"content": "mkdir: created directory 'build'"})
	ts.mustDo(200, "PATCH", "/v1/messages/"+ids[2], map[string]any{"content": ""})
	checkTotals(t, ts, "t")
	ts.Stop()
	mustVerify(t, dir)
}

// ?format=openai (or "format": "openai") answers plain chat messages that
// an OpenAI-style API takes as they are; the rest of the answer stays.
func TestContextOpenAIFormat(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	ts.store("o",
		map[string]any{"role": "system", "content": "You are a build assistant.", "pinned": true},
		map[string]any{"role": "user", "name": "alice", "content": "build the release", "metadata": map[string]any{"ticket": 7}, "important": true},
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
			map[string]any{"id": "b1", "function": map[string]any{"name": "make", "arguments": `{"target":"release"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "b1", "content": "ok: dist/app-1.4.2.tar.gz"},
		msg("assistant", "Built dist/app-1.4.2.tar.gz."))
	req := map[string]any{"prompt": "where is the release archive?", "max_tokens": 2000}
	full := ts.mustDo(200, "POST", "/v1/sessions/o/context", req)
	plain := ts.mustDo(200, "POST", "/v1/sessions/o/context?format=openai", req)
	allowed := []string{"role", "content", "name", "tool_calls", "tool_call_id"}
	msgs := plain["messages"].([]any)
	if len(msgs) != len(full["messages"].([]any)) || len(msgs) != 5 {
		t.Fatalf("openai window has %d messages, the full one %d", len(msgs), len(full["messages"].([]any)))
	}
	for i, x := range msgs {
		m, f := x.(map[string]any), full["messages"].([]any)[i].(map[string]any)
		for k := range m {
			if !slices.Contains(allowed, k) {
				t.Fatalf("message %d has field %q: %v", i, k, m)
			}
		}
		for _, k := range allowed {
			if fmt.Sprint(m[k]) != fmt.Sprint(f[k]) && k != "tool_calls" {
				t.Fatalf("message %d: %s = %v, the full form says %v", i, k, m[k], f[k])
			}
		}
	}
	if m := msgs[1].(map[string]any); m["name"] != "alice" || len(m) != 3 {
		t.Fatalf("user message = %v", m)
	}
	call := msgs[2].(map[string]any)["tool_calls"].([]any)[0].(map[string]any)
	if call["type"] != "function" || call["id"] != "b1" || call["function"].(map[string]any)["name"] != "make" || len(call) != 3 {
		t.Fatalf("tool call = %v", call)
	}
	if m := msgs[3].(map[string]any); m["tool_call_id"] != "b1" || m["role"] != "tool" {
		t.Fatalf("tool result = %v", m)
	}
	for _, k := range []string{"tokens", "budget", "recovered"} {
		if fmt.Sprint(plain[k]) != fmt.Sprint(full[k]) {
			t.Fatalf("%s = %v, the full form says %v", k, plain[k], full[k])
		}
	}
	// What is sent costs what the answer says.
	var chat api.ContextChat
	ts.call(200, "POST", "/v1/sessions/o/context?format=openai", req, &chat)
	var sent []api.WindowMessage
	for _, m := range chat.Messages {
		sent = append(sent, api.WindowMessage{Message: api.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}})
	}
	if got := servertest.Recount(t, sent, req["prompt"].(string)); got != chat.Tokens || got != int(plain["tokens"].(float64)) {
		t.Fatalf("the openai messages count %d tokens, the answer says %v", got, plain["tokens"])
	}
	body := map[string]any{"prompt": req["prompt"], "max_tokens": 2000, "format": "openai", "explain": true}
	if again := ts.mustDo(200, "POST", "/v1/sessions/o/context", body); fmt.Sprint(again["messages"]) != fmt.Sprint(plain["messages"]) {
		t.Fatalf("body format = %v, query format %v", again["messages"], plain["messages"])
	}
	ts.mustDo(200, "POST", "/v1/sessions/o/context?format=openai", body) // both, agreeing
	for _, c := range []struct {
		path string
		body any
	}{
		{"/v1/sessions/o/context?format=xml", req},
		{"/v1/sessions/o/context", map[string]any{"prompt": "x", "format": "OpenAI"}},
		{"/v1/sessions/o/context", map[string]any{"prompt": "x", "format": 1}},
		{"/v1/sessions/o/context?format=openai", map[string]any{"prompt": "x", "format": "ctxd"}},
	} {
		if r := ts.do("POST", c.path, c.body); r.Status != 400 || r.errCode() != "invalid_request" || !strings.Contains(string(r.Raw), "format") {
			t.Fatalf("POST %s %v = %d %s", c.path, c.body, r.Status, r.Raw)
		}
	}
}
