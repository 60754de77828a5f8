package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/fakemodel"
)

// The requests Claude Code and Codex send, reproduced in Go from what the
// agent tests recorded (CTXD_AGENT_DUMP), so that a failure of the CLI
// runs can be worked on in seconds, without npm. They run with the agent
// tests (CTXD_AGENT_TESTS=1) while the gateway cannot pass them yet.

// reproModel starts the fake model playing steps steps in window tokens,
// and ctxd in front of it.
func reproModel(t *testing.T, window, steps int) (*fakemodel.Model, *fakemodel.Task, *testServer) {
	t.Helper()
	if os.Getenv("CTXD_AGENT_TESTS") != "1" {
		t.Skip("reproduces a real agent's requests: run with CTXD_AGENT_TESTS=1 (make test-agents)")
	}
	task, err := fakemodel.NewTask(t.TempDir(), steps)
	if err != nil {
		t.Fatal(err)
	}
	model := fakemodel.New(fakemodel.Config{Window: window, Task: task, Instruction: agentPrompt})
	up := httptest.NewServer(model)
	t.Cleanup(up.Close)
	ts := startServer(t, t.TempDir(), func(c *Config) {
		c.UpstreamOpenAIURL = up.URL + "/v1"
		c.UpstreamAnthropicURL = up.URL
	})
	return model, task, ts
}

// toolOutput is what a client sends back for step k's call: the marker
// the model checks for, then about 2k tokens of output.
func toolOutput(task *fakemodel.Task, k int) string {
	var b strings.Builder
	b.WriteString(task.Marker(k) + "\n")
	for i := range 200 {
		fmt.Fprintf(&b, "line %d of step %d: status ok, checksum %d\n", i, k, i*7919%1000)
	}
	return b.String()
}

// stepOfCall reads the step from the fake model's call id (..._fmNNN).
func stepOfCall(t *testing.T, id string) int {
	t.Helper()
	i := strings.LastIndex(id, "_fm")
	k, err := strconv.Atoi(id[i+3:])
	if i < 0 || err != nil {
		t.Fatalf("call id %q is not the fake model's", id)
	}
	return k
}

// checkRepro fails the test with every rule the model saw broken, and
// unless ctxd compacted: the windows must have been rebuilt.
func checkRepro(t *testing.T, ts *testServer, model *fakemodel.Model, steps int) {
	t.Helper()
	s := model.Stats()
	comp := 0
	for _, raw := range ts.mustDo(200, "GET", "/v1/sessions", nil)["sessions"].([]any) {
		c, _ := raw.(map[string]any)["compactions"].(float64)
		comp += int(c)
	}
	t.Logf("calls %d, flush turns %d, compactions %d, largest prompt %d", s.Calls, s.FlushTurns, comp, s.MaxPrompt)
	if comp == 0 {
		t.Errorf("ctxd never compacted: no window was rebuilt")
	}
	if s.WithoutInstruction > 0 {
		t.Errorf("%d of %d main-loop requests lacked the user's instruction", s.WithoutInstruction, s.MainCalls)
	}
	for _, v := range s.Violations {
		t.Errorf("provider rule broken: %s", v)
	}
	if !s.Completed {
		t.Errorf("the task did not complete: step %d of %d (calls %d, flush turns %d)", s.Steps, steps, s.Calls, s.FlushTurns)
	}
}

// TestAgentReproCodexTools: Codex 0.171 sends its tools as an
// additional_tools input item (a namespace holding its custom exec tool),
// never in "tools", and the user's instruction after a user message of its
// environment; a window ctxd rebuilds must keep both, or the model has no
// tools (or no task) from then on.
func TestAgentReproCodexTools(t *testing.T) {
	const window, steps = 12000, 16
	model, task, ts := reproModel(t, window, steps)
	h := http.Header{"Authorization": {"Bearer sk-fake"}, "X-Ctxd-Context-Window": {strconv.Itoa(window)}}
	input := []any{
		map[string]any{"type": "message", "role": "developer", "content": []any{map[string]any{"type": "input_text", "text": "You are Codex."}}},
		map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{map[string]any{"type": "namespace", "name": "functions",
			"tools": []any{map[string]any{"type": "custom", "name": "exec", "description": "Run JavaScript that calls tools.exec_command."}}}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "<environment_context>\n  <cwd>/work</cwd>\n</environment_context>"}}},
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": agentPrompt}}},
	}
	for call := 1; call <= 2*steps; call++ {
		status, _, body := fakemodel.Post(t, ts.URL+"/v1/responses", h, map[string]any{"model": "gpt-6.2-sol", "input": input, "stream": false,
			"reasoning": map[string]any{"effort": "low"}, "store": false, "include": []string{"reasoning.encrypted_content"}, "prompt_cache_key": "codex-1"})
		if status != 200 {
			t.Errorf("call %d: %d %s", call, status, body)
			break
		}
		var resp struct{ Output []map[string]any }
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		for _, o := range resp.Output {
			input = append(input, o)
		}
		last := resp.Output[len(resp.Output)-1]
		if last["type"] == "message" {
			break
		}
		id := fmt.Sprint(last["call_id"])
		input = append(input, map[string]any{"type": "custom_tool_call_output", "call_id": id, "output": toolOutput(task, stepOfCall(t, id))})
	}
	checkRepro(t, ts, model, steps)
}

// TestAgentReproClaudeCode: Claude Code 2.1.332's requests: ?beta=true,
// adaptive thinking, max_tokens 128,000 (more than the window), a system
// message inside messages (its per-turn control beta), the assistant's
// turns sent back with their thinking blocks.
func TestAgentReproClaudeCode(t *testing.T) {
	const window, steps = 32000, 30
	model, task, ts := reproModel(t, window, steps)
	h := http.Header{"X-Api-Key": {"sk-ant-fake"}, "Anthropic-Version": {"2023-06-01"},
		"Anthropic-Beta":        {"claude-code-20250219,interleaved-thinking-2025-05-14,per-turn-control-2026-07-01"},
		"X-Ctxd-Context-Window": {strconv.Itoa(window)}}
	tools := []any{map[string]any{"name": "Bash", "description": "Run a command",
		"input_schema": map[string]any{"type": "object", "properties": map[string]any{"command": map[string]any{"type": "string"}}, "required": []string{"command"}}}}
	messages := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": agentPrompt}}},
		map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": "# Environment\nPrimary working directory: /work"}}},
	}
	for call := 1; call <= 2*steps; call++ {
		status, _, body := fakemodel.Post(t, ts.URL+"/v1/messages?beta=true", h, map[string]any{"model": "claude-opus-5-5", "max_tokens": 128000,
			"thinking": map[string]any{"type": "adaptive"}, "system": []any{map[string]any{"type": "text", "text": "You are Claude Code.", "cache_control": map[string]any{"type": "ephemeral"}}},
			"tools": tools, "messages": messages, "metadata": map[string]any{"user_id": `{"session_id":"cc-1"}`}})
		if status != 200 {
			t.Errorf("call %d: %d %s", call, status, body)
			break
		}
		var resp struct{ Content []map[string]any }
		if err := json.Unmarshal(body, &resp); err != nil {
			t.Fatal(err)
		}
		messages = append(messages, map[string]any{"role": "assistant", "content": resp.Content})
		last := resp.Content[len(resp.Content)-1]
		if last["type"] != "tool_use" {
			break
		}
		id := fmt.Sprint(last["id"])
		messages = append(messages, map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "tool_result", "tool_use_id": id, "content": toolOutput(task, stepOfCall(t, id))}}})
	}
	checkRepro(t, ts, model, steps)
}
