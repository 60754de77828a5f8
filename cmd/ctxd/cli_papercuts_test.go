package main

import (
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server/servertest"
)

// What a table shows of a message: search prints the part that matched,
// not the message's start; an assistant turn that only calls tools shows
// its calls; `context --dry-run` looks without recovering anything, where
// `context` brings the relevant cold message back.
func TestCLIShowsWhatMatters(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	long := strings.Repeat("The deploy checklist covers the usual steps for every service. ", 6) +
		"The zanzibar cluster's failover drill happens on the first of the month."
	ids := ts.store("ops",
		map[string]any{"role": "system", "content": "You are a deployment assistant.", "pinned": true},
		msg("user", long),
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "bash", "arguments": `{"command": "kubectl get pods -n zanzibar"}`}}}},
		map[string]any{"role": "tool", "tool_call_id": "c1", "content": "pod-a Running"},
		msg("user", "thanks, that is all for now"))

	rows := lines(ts.cli(t, 0, "search", "zanzibar failover drill", "--session", "ops", "--mode", "text").Out)
	if len(rows) < 2 || !strings.Contains(rows[1], ids[1]) || !strings.Contains(rows[1], "«zanzibar»") {
		t.Errorf("search does not show the matching part of the message:\n%s", strings.Join(rows, "\n"))
	}

	servertest.DropInStore(t, ts.Main.Store, ts.now(), "ops", ids[1], ids[2], ids[3])
	ts.store("ops", msg("user", "next"))
	out := ts.cli(t, 0, "cold", "list", "--session", "ops").Out
	if !strings.Contains(out, `→ bash {"command": "kubectl get pods -n zanzibar"}`) {
		t.Errorf("cold list shows no content for the tool-call turn:\n%s", out)
	}

	prompt := "when is the zanzibar failover drill?"
	dry := ts.cli(t, 0, "context", "ops", prompt, "--dry-run").Out
	if !strings.Contains(dry, ids[1]) || !strings.Contains(dry, "1 would be recovered") {
		t.Errorf("context --dry-run: the window lacks the cold answer:\n%s", dry)
	}
	if cold := ts.cli(t, 0, "cold", "list", "--session", "ops").Out; !strings.Contains(cold, ids[1]) {
		t.Errorf("after --dry-run the message is no longer cold:\n%s", cold)
	}
	ts.cli(t, 0, "context", "ops", prompt)
	if cold := ts.cli(t, 0, "cold", "list", "--session", "ops").Out; strings.Contains(cold, ids[1]) {
		t.Errorf("context did not recover the cold message:\n%s", cold)
	}
}
