package main

import (
	"fmt"
)

// Helpers that write tool turns and move messages cold, for the
// process-level tests (the window's checks are servertest's; its rules are
// tested in memory and internal/server).

func toolTurn(i int, output string) []map[string]any {
	id := fmt.Sprintf("call_%d", i)
	return []map[string]any{
		{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"id": id, "type": "function",
			"function": map[string]any{"name": "run", "arguments": fmt.Sprintf(`{"step":%d}`, i)}}}},
		{"role": "tool", "tool_call_id": id, "content": output},
	}
}
