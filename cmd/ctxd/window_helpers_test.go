package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
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

// dropInStore moves messages to cold storage straight in the store, as a
// compaction would (the index learns of it with the next write).
func dropInStore(t *testing.T, ts *testServer, session string, ids ...string) {
	t.Helper()
	ctx := memory.NewContextWithTenant(t.Context(), memory.DefaultTenant)
	if _, err := ts.Main.Store.Update(ctx, memory.DefaultTenant, session, func(tx memory.SessionTx) error {
		for _, id := range ids {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			m.State = memory.StateDropped
			m.Cold = &memory.ColdInfo{DropReason: memory.ReasonLowRelevance, DroppedAt: ts.now(), RecoverableUntil: ts.now().Add(time.Hour)}
			if err := tx.Put(m); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
