package memory_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/memorytest"
)

// A coding agent's newest input is often a tool output of tens of
// kilobytes: the context call takes it whole as the prompt (it was refused
// over 16 KiB), counts it whole when it is not stored, once when it is, and
// refuses only what no message could hold.
func TestLongPromptAccepted(t *testing.T) {
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
