package server_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// A tool loop's calls alternating between two nodes, without affinity, get
// the windows one node gives the same calls: the layout that keeps a loop's
// window cache-stable (each window the last plus the new step, until it
// no longer fits) is kept in the database. Kept in each node's memory, a
// call on the other node built its window afresh, and the provider's cached
// prefix was lost on every move.
func TestTwoNodesWithoutAffinityKeepTheLoopWindowStable(t *testing.T) {
	ctx := memory.NewContextWithTenant(context.Background(), memory.DefaultTenant)
	dsn := pgtest.DSN(t)
	a, b := serviceNode(t, dsn, nil), serviceNode(t, dsn, nil)
	one := serviceNode(t, pgtest.DSN(t), nil) // a node alone on a database of its own
	run := func(nodes ...*memory.Service) (windows []string, appended int) {
		t.Helper()
		window := 16000
		if _, err := nodes[0].PutSession(ctx, "loop", memory.SessionUpdate{ContextWindow: &window}); err != nil {
			t.Fatal(err)
		}
		if _, err := nodes[0].Append(ctx, "loop", []*memory.Message{
			{Role: memory.RoleSystem, Content: "You are a coding agent. Use bash.", Pinned: true},
			{Role: memory.RoleUser, Content: "Make the failing test in tests/test_payments.py pass."}}); err != nil {
			t.Fatal(err)
		}
		var prev []string
		for i := 1; i <= 24; i++ {
			node := nodes[i%len(nodes)]
			var out strings.Builder
			for k := range 3 + i%4 {
				fmt.Fprintf(&out, "    def handler_%d_%d(self, request_obj): return self.resolve_name(request_obj)  # line %d\n", i, k, k)
			}
			id := fmt.Sprintf("call_%d", i)
			if _, err := node.Append(ctx, "loop", []*memory.Message{
				{Role: memory.RoleAssistant, Content: fmt.Sprintf("step %d: looking further", i),
					ToolCalls: []memory.ToolCall{{ID: id, Type: "function", Function: memory.FunctionCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":"cat src/mod_%d.py"}`, i)}}}},
				{Role: memory.RoleTool, ToolCallID: id, Content: out.String()}}); err != nil {
				t.Fatal(err)
			}
			w, err := node.Context(ctx, "loop", memory.ContextRequest{Prompt: out.String(), MaxTokens: 1500})
			if err != nil {
				t.Fatal(err)
			}
			var msgs []string
			for _, m := range w.Messages {
				msgs = append(msgs, fmt.Sprintf("%s|%s|%s|%v", m.Role, m.ToolCallID, m.Content, m.ToolCalls))
			}
			if prev != nil && w.StablePrefix == len(prev) {
				appended++
			}
			prev = msgs
			windows = append(windows, strings.Join(msgs, "\n"))
		}
		return windows, appended
	}
	alone, appendedAlone := run(one)
	moving, appendedMoving := run(a, b)
	for i := range alone {
		if alone[i] != moving[i] {
			t.Fatalf("call %d: the window on alternating nodes differs from one node's:\n--- one node:\n%s\n--- alternating:\n%s", i+1, alone[i], moving[i])
		}
	}
	if appendedAlone < 10 || appendedMoving != appendedAlone {
		t.Fatalf("windows that extended the last: %d on one node, %d alternating; want many, and as many", appendedAlone, appendedMoving)
	}
}
