package memory_test

import (
	"context"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// A conversation's window for the message just stored is the working
// window whole, in order, and the cold messages the prompt recalls in one
// block just before that message, sent but left cold: the next call's
// window repeats everything before the block, and the working window does
// not change under it.
func TestChatWindowRecallsBeforeTheNewestInput(t *testing.T) {
	h := memorytest.Open(t)
	ctx := context.Background()
	h.Compacted(t, ctx, "c")
	ask := "Which password manager did we choose, zebrafish or another?"
	res := mustAppend(t, h, "c", &memory.Message{Role: memory.RoleUser, Content: ask})
	w, err := h.Context(ctx, "c", memory.ContextRequest{Prompt: ask})
	if err != nil {
		t.Fatal(err)
	}
	n := len(w.Messages)
	if w.Messages[n-1].ID != res.IDs[0] {
		t.Fatalf("the window ends with %s, not the newest input", w.Messages[n-1].ID)
	}
	recalled := w.Messages[n-2]
	if recalled.Source != memory.SourceRecovered || recalled.Content != "turn 2: the password manager we chose is called zebrafish, keep its vault on the blue drive" {
		t.Fatalf("just before the newest input: %s %q, want the recalled zebrafish turn", recalled.Source, recalled.Content)
	}
	if len(w.Recovered) != 0 {
		t.Errorf("recovered %v: a chat's recall is sent, not moved back into the working window", w.Recovered)
	}
	if m, err := h.Message(ctx, recalled.ID); err != nil || m.InWindow() {
		t.Fatalf("the recalled turn: %v, state %v: want it left cold", err, m.State)
	}
	for _, m := range w.Messages[:n-2] {
		if m.Source == memory.SourceRecovered {
			t.Fatalf("recovered %s outside the block before the newest input", m.ID)
		}
	}

	// The next turn: everything before the recall block repeats.
	mustAppend(t, h, "c", &memory.Message{Role: memory.RoleAssistant, Content: "We chose zebrafish."},
		&memory.Message{Role: memory.RoleUser, Content: "And where is its vault kept?"})
	next, err := h.Context(ctx, "c", memory.ContextRequest{Prompt: "And where is its vault kept?"})
	if err != nil {
		t.Fatal(err)
	}
	if next.StablePrefix < n-2 {
		t.Fatalf("stable prefix %d of the next window, want the %d messages before the recall block", next.StablePrefix, n-2)
	}
	for i := range n - 2 {
		if !sameMessage(w.Messages[i], next.Messages[i]) {
			t.Fatalf("message %d differs in the next window: %s, then %s", i, w.Messages[i].ID, next.Messages[i].ID)
		}
	}

	// A note the agent pinned after its input leads the window; the
	// recall block still goes before the input.
	ask = "Was the zebrafish vault on the blue drive?"
	in := mustAppend(t, h, "c", &memory.Message{Role: memory.RoleAssistant, Content: "On the blue drive."},
		&memory.Message{Role: memory.RoleUser, Content: ask})
	mustAppend(t, h, "c", &memory.Message{Role: memory.RoleSystem, Content: "Note: the vault question again.", Pinned: true})
	w, err = h.Context(ctx, "c", memory.ContextRequest{Prompt: ask})
	if err != nil {
		t.Fatal(err)
	}
	n = len(w.Messages)
	if w.Messages[n-1].ID != in.IDs[1] || w.Messages[n-2].Source != memory.SourceRecovered {
		t.Fatalf("after a pinned note: the window ends with %s (%s) then %s, want the recall block then the input",
			w.Messages[n-2].ID, w.Messages[n-2].Source, w.Messages[n-1].ID)
	}
}
