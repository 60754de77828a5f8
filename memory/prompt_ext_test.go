package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// A coding agent's newest input is often a tool output of tens of
// kilobytes: the context call takes it whole as the prompt (it was refused
// over 16 KiB), counts it whole when it is not stored, once when it is, and
// refuses only what no message could hold.
func TestLongPromptAccepted(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	long := codeOutput(7, 500) // ~45 KB
	if len(long) < 40<<10 {
		t.Fatalf("the fixture is only %d bytes", len(long))
	}
	mustAppend(t, h, "p", &memory.Message{Role: memory.RoleUser, Content: "Fix src/app.py"})

	// Not stored: counted whole, exactly as the message it would be.
	w, err := h.Context(ctx, "p", memory.ContextRequest{Prompt: long, MaxTokens: 200000})
	if err != nil {
		t.Fatalf("a %d-byte prompt: %v", len(long), err)
	}
	want, err := memory.MessageTokens(h.Tokenizer, memory.EncodingO200k, &memory.Message{Role: memory.RoleUser, Content: long})
	if err != nil {
		t.Fatal(err)
	}
	if w.Budget.PromptTokens != want {
		t.Errorf("prompt_tokens %d, the whole prompt costs %d", w.Budget.PromptTokens, want)
	}

	// Stored as the newest input: counted once, as that message.
	mustAppend(t, h, "p", step(7, long)...)
	if w, err = h.Context(ctx, "p", memory.ContextRequest{Prompt: long, MaxTokens: 200000}); err != nil {
		t.Fatal(err)
	}
	if w.Budget.PromptTokens != 0 {
		t.Errorf("the stored input was counted again as the prompt: %d tokens", w.Budget.PromptTokens)
	}

	// Over the size of a message: 413, nothing built.
	huge := strings.Repeat("x ", memory.DefaultLimits.MaxContentBytes/2+1)
	_, err = h.Context(ctx, "p", memory.ContextRequest{Prompt: huge, MaxTokens: 8000})
	if memory.ErrorCode(err) != memory.ETOOLARGE {
		t.Errorf("a %d-byte prompt: %v, want %s", len(huge), err, memory.ETOOLARGE)
	}
	if _, err = h.Compact(ctx, "p", memory.CompactRequest{Prompt: long}); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("a compaction with a %d-byte prompt: %v", len(long), err)
	}
}

// A note the agent pins between its input and the context call does not
// make the input any less the newest: it is counted once.
func TestInputBeforeNoteCountedOnce(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	out := codeOutput(1, 60)
	mustAppend(t, h, "n", &memory.Message{Role: memory.RoleUser, Content: "Fix src/app.py"})
	mustAppend(t, h, "n", step(1, out)...)
	mustAppend(t, h, "n", &memory.Message{Role: memory.RoleSystem, Content: "Note: the handler table lives in src/mod_1.py", Pinned: true})
	w, err := h.Context(ctx, "n", memory.ContextRequest{Prompt: out, MaxTokens: 8000})
	if err != nil {
		t.Fatal(err)
	}
	if w.Budget.PromptTokens != 0 {
		t.Errorf("the input before the note was counted again: prompt_tokens %d", w.Budget.PromptTokens)
	}
}

// --explain shows why each message would rank even where the builder did
// not need to rank (the README's demo session fits whole; a tool loop's
// recent steps): it showed zeros for all of them.
func TestExplainScoresEveryMessage(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	mustAppend(t, h, "demo", &memory.Message{Role: memory.RoleSystem, Content: "You are a deployment assistant.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "The staging DB password rotates every Friday.", Name: "alice"})
	mustAppend(t, h, "loop", &memory.Message{Role: memory.RoleUser, Content: "Fix src/app.py"})
	for i := 0; i < 3; i++ {
		mustAppend(t, h, "loop", step(i, codeOutput(i, 20))...)
	}
	for _, tc := range []struct{ session, prompt, match string }{
		{"demo", "rotate it now?", "rotates"},
		{"loop", "which handler resolves handler_2_3?", "handler_2_3"},
	} {
		for _, explain := range []bool{false, true} {
			w, err := h.Context(ctx, tc.session, memory.ContextRequest{Prompt: tc.prompt, MaxTokens: 4000, Explain: explain})
			if err != nil {
				t.Fatal(err)
			}
			matched := false
			for _, m := range w.Messages {
				if m.Kind == memory.KindDigest {
					continue // made for this window, not stored: nothing to score
				}
				if (m.Components != nil) != explain {
					t.Errorf("%s, explain %v: message %s has components %v", tc.session, explain, m.ID, m.Components)
				}
				if explain && strings.Contains(m.Content, tc.match) {
					matched = m.Components != nil && m.Components.Similarity > 0 && m.Score > 0
				}
			}
			if explain && !matched {
				t.Errorf("%s: the message that answers %q shows no similarity", tc.session, tc.prompt)
			}
		}
	}
}
