package main

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// Helpers of the window's checks, for the process-level tests that read
// windows (the window's own rules are tested in internal/server).

// testTokenizer is shared by the tests: an encoding loads (and is checked
// against tiktoken-go) once per tokenizer, ~0.3 s, which a count per
// message would pay again and again.
var testTokenizer = sync.OnceValue(tokenizer.New)

// recount counts a returned window exactly, as the client would send it.
func recount(t *testing.T, msgs []any, prompt string) int {
	t.Helper()
	tok := testTokenizer()
	total := memory.ReplyPriming
	if prompt != "" {
		n, _ := memory.MessageTokens(tok, memory.EncodingO200k, &memory.Message{Role: memory.RoleUser, Content: prompt})
		total += n
	}
	for _, x := range msgs {
		m := x.(map[string]any)
		wm := &memory.Message{Role: memory.Role(m["role"].(string)), Content: m["content"].(string)}
		if n, ok := m["name"].(string); ok {
			wm.Name = n
		}
		if id, ok := m["tool_call_id"].(string); ok {
			wm.ToolCallID = id
		}
		if tcs, ok := m["tool_calls"].([]any); ok {
			for _, tc := range tcs {
				c := tc.(map[string]any)
				f := c["function"].(map[string]any)
				wm.ToolCalls = append(wm.ToolCalls, memory.ToolCall{ID: c["id"].(string), Type: "function",
					Function: memory.FunctionCall{Name: f["name"].(string), Arguments: f["arguments"].(string)}})
			}
		}
		n, err := memory.MessageTokens(tok, memory.EncodingO200k, wm)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

// checkSequence asserts the window is a valid OpenAI chat sequence.
func checkSequence(t *testing.T, msgs []any) {
	t.Helper()
	open := map[string]bool{}
	seenNonSystem := false
	for i, x := range msgs {
		m := x.(map[string]any)
		role := m["role"].(string)
		if role == "system" && seenNonSystem {
			t.Fatalf("message %d: system message after the conversation started", i)
		}
		if role != "system" {
			seenNonSystem = true
		}
		if role != "tool" && len(open) > 0 {
			t.Fatalf("message %d: tool calls %v left without results", i, open)
		}
		switch role {
		case "assistant":
			if tcs, ok := m["tool_calls"].([]any); ok {
				for _, tc := range tcs {
					open[tc.(map[string]any)["id"].(string)] = true
				}
			}
		case "tool":
			id := m["tool_call_id"].(string)
			if !open[id] {
				t.Fatalf("message %d: tool result %s without the call before it", i, id)
			}
			delete(open, id)
		}
		if m["source"] == nil {
			t.Fatalf("message %d has no source", i)
		}
	}
	if len(open) > 0 {
		t.Fatalf("window ends with unanswered tool calls %v", open)
	}
}

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
