package boltstore_test

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// Reads hand out messages the caller may change: changing one, down to its
// cold record, tool calls, sources and metadata, leaves what the next read
// returns as stored; and a message rewritten since a read is read anew.
func TestReadsAreCopiesAndFresh(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, filepath.Join(t.TempDir(), "ctxd.db"))
	m := msgs("a", 1)[0]
	m.Cold = &memory.ColdInfo{DropReason: memory.ReasonBudget, PromptAtDrop: "why"}
	m.ToolCalls = []memory.ToolCall{{ID: "c1", Type: "function", Function: memory.FunctionCall{Name: "f", Arguments: "{}"}}}
	m.Sources = []string{"x", "y"}
	m.Metadata = map[string]any{"tags": []any{"a", map[string]any{"k": "v"}}, "n": 1.0}
	m.Prune = &memory.PruneCosts{Trimmed: 3, Cleared: 1}
	if _, err := s.Append(ctx, "t", "s", newSession("t", "s"), []*memory.Message{m}); err != nil {
		t.Fatal(err)
	}
	read := func() *memory.Message {
		t.Helper()
		byID, err := s.MessagesByID(ctx, "t", []string{m.ID}, false)
		if err != nil || len(byID) != 1 {
			t.Fatalf("MessagesByID = %v, %v", byID, err)
		}
		listed, err := s.Messages(ctx, "t", "s", memory.MessageQuery{})
		if err != nil || len(listed) != 1 {
			t.Fatalf("Messages = %v, %v", listed, err)
		}
		if !reflect.DeepEqual(byID[0], listed[0]) {
			t.Fatalf("by id %+v, listed %+v", byID[0], listed[0])
		}
		return listed[0]
	}
	first := read()
	want := *first
	first.Cold.PromptAtDrop = "changed"
	first.ToolCalls[0].Function.Name = "g"
	first.Sources[0] = "z"
	first.Metadata["n"] = 2.0
	first.Metadata["tags"].([]any)[1].(map[string]any)["k"] = "w"
	first.Prune.Trimmed = 9
	first.Content = "changed"
	again := read()
	if again.Cold.PromptAtDrop != "why" || again.ToolCalls[0].Function.Name != "f" || again.Sources[0] != "x" ||
		again.Metadata["n"] != 1.0 || again.Metadata["tags"].([]any)[1].(map[string]any)["k"] != "v" ||
		again.Prune.Trimmed != 3 || again.Content != want.Content {
		t.Fatalf("a change to a read message showed in the next read: %+v", again)
	}

	_, err := s.Update(ctx, "t", "s", func(tx memory.SessionTx) error {
		m, err := tx.Message(m.ID)
		if err != nil {
			return err
		}
		m.Content, m.State = "rewritten", memory.StateDropped
		return tx.Put(m)
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := read(); got.Content != "rewritten" || got.State != memory.StateDropped {
		t.Fatalf("read after a rewrite: %+v", got)
	}
}
