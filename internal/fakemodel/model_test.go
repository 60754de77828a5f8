package fakemodel

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func newModel(t *testing.T, window int) (*Model, *httptest.Server) {
	t.Helper()
	task, err := NewTask(t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	m := New(Config{Window: window, Task: task})
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return m, srv
}

func post(t *testing.T, url, body string) (int, map[string]any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

const bashTool = `"tools": [{"name": "Bash", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]`

// TestAnthropicRules: each rule the real API enforces is refused 400 in its
// error shape and recorded.
func TestAnthropicRules(t *testing.T) {
	m, srv := newModel(t, 2000)
	url := srv.URL + "/v1/messages"
	thinking := `"thinking": {"type": "enabled", "budget_tokens": 100}, "max_tokens": 200, ` + bashTool
	// The model's own first answer: a thinking block, then step 1's call.
	status, first := post(t, url, `{`+thinking+`, "messages": [{"role": "user", "content": "go"}]}`)
	if status != 200 {
		t.Fatalf("first call: %d %v", status, first)
	}
	content, _ := json.Marshal(first["content"])
	blocks := first["content"].([]any)
	if blocks[0].(map[string]any)["type"] != "thinking" || blocks[1].(map[string]any)["id"] != "toolu_fm001" {
		t.Fatalf("first answer %s", content)
	}
	result := `{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_fm001", "content": "` + m.cfg.Task.Marker(1) + `"}]}`
	noThinking, _ := json.Marshal(blocks[1:])
	badSig := strings.Replace(string(content), `"signature":"`, `"signature":"x`, 1)
	for name, body := range map[string]string{
		"thinking block dropped": `{` + thinking + `, "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": ` + string(noThinking) + `}, ` + result + `]}`,
		"signature altered":      `{` + thinking + `, "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": ` + badSig + `}, ` + result + `]}`,
		"tool_use unanswered":    `{` + thinking + `, "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": ` + string(content) + `}, {"role": "user", "content": "next"}]}`,
		"result without its use": `{` + thinking + `, "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": "ok"}, ` + result + `]}`,
		"five breakpoints": `{"max_tokens": 100, "system": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}}],
			"messages": [{"role": "user", "content": [{"type": "text", "text": "d", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "e", "cache_control": {"type": "ephemeral"}}]}]}`,
		"over the window": `{"max_tokens": 1990, "messages": [{"role": "user", "content": "` + strings.Repeat("word ", 50) + `"}]}`,
	} {
		before := len(m.Stats().Violations)
		status, out := post(t, url, body)
		e, _ := out["error"].(map[string]any)
		if status != 400 || out["type"] != "error" || e["type"] != "invalid_request_error" {
			t.Errorf("%s: %d %v, want a 400 invalid_request_error", name, status, out)
		}
		if got := len(m.Stats().Violations); got != before+1 {
			t.Errorf("%s: %d violations recorded, want 1", name, got-before)
		}
	}
	// Sent back whole, the turn passes and the task goes on.
	status, out := post(t, url, `{`+thinking+`, "messages": [{"role": "user", "content": "go"}, {"role": "assistant", "content": `+string(content)+`}, `+result+`]}`)
	if status != 200 || !strings.Contains(fmtJSON(out["content"]), "toolu_fm002") {
		t.Fatalf("whole turn: %d %v", status, out)
	}
}

// TestOpenAIPairing: a tool message must answer a call, and every call be
// answered, in both OpenAI APIs.
func TestOpenAIPairing(t *testing.T) {
	m, srv := newModel(t, 100000)
	fn := `"tools": [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}]`
	for name, c := range map[string]struct{ path, body string }{
		"chat orphan result": {"/v1/chat/completions", `{` + fn + `, "messages": [{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "call_x", "content": "out"}]}`},
		"chat unanswered": {"/v1/chat/completions", `{` + fn + `, "messages": [{"role": "user", "content": "go"},
			{"role": "assistant", "tool_calls": [{"id": "call_x", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}, {"role": "user", "content": "next"}]}`},
		"responses orphan output": {"/v1/responses", `{"input": [{"role": "user", "content": "go"}, {"type": "function_call_output", "call_id": "call_x", "output": "out"}]}`},
		"responses forged reasoning": {"/v1/responses", `{"input": [{"role": "user", "content": "go"}, {"type": "reasoning", "id": "rs_1", "encrypted_content": "00.11"},
			{"type": "function_call", "call_id": "c", "name": "bash", "arguments": "{}"}, {"type": "function_call_output", "call_id": "c", "output": "o"}]}`},
	} {
		status, out := post(t, srv.URL+c.path, c.body)
		if e, _ := out["error"].(map[string]any); status != 400 || e["message"] == nil {
			t.Errorf("%s: %d %v, want a 400 with an OpenAI error", name, status, out)
		}
	}
	if n := len(m.Stats().Violations); n != 4 {
		t.Errorf("%d violations, want 4: %v", n, m.Stats().Violations)
	}
}

func fmtJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// Step ids read back whole: a 1,000-step task's last step is 1000, not 100.
func TestStepOf(t *testing.T) {
	for _, k := range []int{1, 44, 999, 1000, 12345} {
		if got, ok := stepOf(callID("call", k)); !ok || got != k {
			t.Errorf("stepOf(%q) = %d, %v", callID("call", k), got, ok)
		}
	}
	if _, ok := stepOf("toolu_flush7"); ok {
		t.Error("a flush turn's id read as a step")
	}
}
