package memory_test

import (
	"context"
	"strings"
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
	t.Parallel()
	h, w := askCompacted(t, 0)
	ctx := context.Background()
	n := len(w.Messages)
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
	if w.StableUntil != n-2 || next.StablePrefix < n-2 {
		t.Fatalf("stable until %d, then a stable prefix %d of the next window: want the %d messages before the recall block",
			w.StableUntil, next.StablePrefix, n-2)
	}
	for i := range n - 2 {
		if !sameMessage(w.Messages[i], next.Messages[i]) {
			t.Fatalf("message %d differs in the next window: %s, then %s", i, w.Messages[i].ID, next.Messages[i].ID)
		}
	}

	// A note the agent pinned after its input leads the window; the
	// recall block still goes before the input.
	ask := "Was the zebrafish vault on the blue drive?"
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

// A working window too large to leave the recall block its room is cut:
// the newest turns stay in order as the stable part, the block before the
// newest input brings what the prompt recalls from before the cut and from
// cold storage, and the next call keeps the cut, so its window repeats the
// stable part exactly.
func TestChatWindowCutsALargeWorkingWindow(t *testing.T) {
	t.Parallel()
	const budget = 400
	h, w := askCompacted(t, budget)
	ctx := context.Background()
	if w.Tokens > budget {
		t.Fatalf("window of %d tokens, budget %d", w.Tokens, budget)
	}
	st, err := h.GetSession(ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if st.Tokens <= budget {
		t.Fatalf("the working window holds %d tokens: the test needs one larger than the budget", st.Tokens)
	}
	n := len(w.Messages)
	// The stable part: the leading messages in the conversation's order,
	// ending with the newest turn before the input; the block follows.
	stable := 0
	for stable+1 < n-1 && w.Messages[stable+1].Position() > w.Messages[stable].Position() {
		stable++
	}
	stable++
	if stable == n-1 {
		t.Fatalf("no recall block before the newest input: %d messages in order", n)
	}
	zebra := -1
	for i, m := range w.Messages {
		if strings.Contains(m.Content, "zebrafish, keep its vault") {
			zebra = i
		}
	}
	if zebra < stable || zebra >= n-1 {
		t.Fatalf("the zebrafish turn at %d, want it in the recall block (messages %d..%d)", zebra, stable, n-2)
	}

	// The next turn keeps the cut: the stable part repeats.
	ask := "And where is its vault kept?"
	mustAppend(t, h, "c", &memory.Message{Role: memory.RoleAssistant, Content: "We chose zebrafish."},
		&memory.Message{Role: memory.RoleUser, Content: ask})
	next, err := h.Context(ctx, "c", memory.ContextRequest{Prompt: ask, MaxTokens: budget})
	if err != nil {
		t.Fatal(err)
	}
	if w.StableUntil != stable || next.StablePrefix < stable {
		t.Fatalf("stable until %d, then a stable prefix %d of the next window: want the %d messages of the stable part",
			w.StableUntil, next.StablePrefix, stable)
	}
	for i := range stable {
		if !sameMessage(w.Messages[i], next.Messages[i]) {
			t.Fatalf("message %d differs in the next window: %s, then %s", i, w.Messages[i].ID, next.Messages[i].ID)
		}
	}
}

// askCompacted stores a question about a turn of a compacted session (see
// memorytest.Compacted) as its newest message and asks for its window
// within maxTokens (0: the session's default), which must end with it.
func askCompacted(t *testing.T, maxTokens int) (*memorytest.Harness, *memory.ContextResult) {
	t.Helper()
	h := memorytest.Open(t)
	ctx := context.Background()
	h.Compacted(t, ctx, "c")
	ask := "Which password manager did we choose, zebrafish or another?"
	in := mustAppend(t, h, "c", &memory.Message{Role: memory.RoleUser, Content: ask})
	w, err := h.Context(ctx, "c", memory.ContextRequest{Prompt: ask, MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(w.Messages); w.Messages[n-1].ID != in.IDs[0] {
		t.Fatalf("the window ends with %s, not the newest input", w.Messages[n-1].ID)
	}
	return h, w
}
