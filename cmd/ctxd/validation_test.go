package main

import (
	"fmt"
	"strings"
	"testing"
)

// Every bad request answers its 4xx in the API's error shape and changes nothing.
func TestBadInputChangesNothing(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir(), func(c *Config) {
		c.MaxContentBytes = 4096
		c.BodyLimit = 64 << 10
		c.MaxMessagesPerCall = 20
	})
	ts.store("s", msg("user", "existing message"))
	before := ts.snapshot("s")

	many := make([]any, 21)
	for i := range many {
		many[i] = msg("user", "x")
	}
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"malformed json", "POST", "/v1/sessions/s/messages", `{"messages": [`, 400, "invalid_request"},
		{"not an object", "POST", "/v1/sessions/s/messages", `[1,2]`, 400, "invalid_request"},
		{"trailing data", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a"}]} {}`, 400, "invalid_request"},
		{"empty body", "POST", "/v1/sessions/s/messages", ``, 400, "invalid_request"},
		{"no messages", "POST", "/v1/sessions/s/messages", `{"messages": []}`, 400, "invalid_request"},
		{"messages wrong type", "POST", "/v1/sessions/s/messages", `{"messages": "hi"}`, 400, "invalid_request"},
		{"content wrong type", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":42}]}`, 400, "invalid_request"},
		{"important wrong type", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a","important":"yes"}]}`, 400, "invalid_request"},
		{"unknown role", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"robot","content":"a"}]}`, 400, "invalid_request"},
		{"missing role", "POST", "/v1/sessions/s/messages", `{"messages":[{"content":"a"}]}`, 400, "invalid_request"},
		{"empty content", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"   "}]}`, 400, "invalid_request"},
		{"second of two bad", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"ok"},{"role":"user","content":""}]}`, 400, "invalid_request"},
		{"tool_calls on user", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, 400, "invalid_request"},
		{"invalid utf-8", "POST", "/v1/sessions/s/messages", []byte("{\"messages\":[{\"role\":\"user\",\"content\":\"bad \xff\xfe bytes\"}]}"), 400, "invalid_request"},
		{"nul byte", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a\u0000b"}]}`, 400, "invalid_request"},
		{"nested metadata", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a","metadata":{"x":{"y":1}}}]}`, 400, "invalid_request"},
		{"metadata array", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a","metadata":{"x":[1]}}]}`, 400, "invalid_request"},
		{"bad created_at", "POST", "/v1/sessions/s/messages", `{"messages":[{"role":"user","content":"a","created_at":"yesterday"}]}`, 400, "invalid_request"},
		{"content too large", "POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("user", strings.Repeat("a", 4097))}}, 413, "too_large"},
		{"too many messages", "POST", "/v1/sessions/s/messages", map[string]any{"messages": many}, 413, "too_large"},
		{"body too large", "POST", "/v1/sessions/s/messages", map[string]any{"messages": []any{msg("user", strings.Repeat("b", 70<<10))}}, 413, "too_large"},
		{"session id with dots", "POST", "/v1/sessions/..%2F..%2Fetc/messages", map[string]any{"messages": []any{msg("user", "a")}}, 400, "invalid_request"},
		{"session id with slash", "POST", "/v1/sessions/a%2Fb/messages", map[string]any{"messages": []any{msg("user", "a")}}, 400, "invalid_request"},
		{"session id starting with dot", "PUT", "/v1/sessions/.hidden", nil, 400, "invalid_request"},
		{"session id too long", "PUT", "/v1/sessions/" + strings.Repeat("x", 129), nil, 400, "invalid_request"},
		{"session id bad char", "GET", "/v1/sessions/a%20b", nil, 400, "invalid_request"},
		{"context_window wrong type", "PUT", "/v1/sessions/s", `{"context_window":"big"}`, 400, "invalid_request"},
		{"context_window too small", "PUT", "/v1/sessions/s", `{"context_window":10}`, 400, "invalid_request"},
		{"unknown encoding", "PUT", "/v1/sessions/s", `{"encoding":"p50k_base"}`, 400, "invalid_request"},
		{"bad state filter", "GET", "/v1/sessions/s/messages?state=gone", nil, 400, "invalid_request"},
		{"bad limit", "GET", "/v1/sessions/s/messages?limit=abc", nil, 400, "invalid_request"},
		{"limit too big", "GET", "/v1/sessions?limit=100000", nil, 400, "invalid_request"},
		{"bad cursor", "GET", "/v1/sessions/s/messages?cursor=zzz", nil, 400, "invalid_request"},
		{"empty query", "POST", "/v1/search", `{"query":""}`, 400, "invalid_request"},
		{"bad mode", "POST", "/v1/search", `{"query":"a","mode":"fuzzy"}`, 400, "invalid_request"},
		{"bad k", "POST", "/v1/search", `{"query":"a","k":-1}`, 400, "invalid_request"},
		{"bad since", "POST", "/v1/search", `{"query":"a","since":"last week"}`, 400, "invalid_request"},
		{"bad search session", "POST", "/v1/search", `{"query":"a","session_id":"../x"}`, 400, "invalid_request"},
		{"unknown route", "GET", "/v1/nothing", nil, 404, "not_found"},
		{"wrong method", "PATCH", "/v1/sessions/s", nil, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := ts.do(c.method, c.path, c.body)
			if r.Status != c.status || r.errCode() != c.code {
				t.Fatalf("%s %s = %d %s, want %d %s", c.method, c.path, r.Status, r.Raw, c.status, c.code)
			}
			e := r.Body["error"].(map[string]any)
			if msg, _ := e["message"].(string); msg == "" {
				t.Fatalf("error without a message: %s", r.Raw)
			}
			if after := ts.snapshot("s"); after != before {
				t.Fatalf("a refused request changed data:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// The store still takes good writes afterwards, and an assistant message
	// with tool_calls may have no content.
	ts.store("s", map[string]any{"role": "assistant", "content": "", "tool_calls": []any{
		map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "ls", "arguments": `{"path":"/tmp"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"})
	st := ts.mustDo(200, "GET", "/v1/sessions/s", nil)
	if n := st["messages"].(map[string]any)["active"]; n != float64(3) {
		t.Fatalf("active = %v, want 3", fmt.Sprint(n))
	}
}
