package memory_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// sameMessage: the two window messages are what a provider would see as
// the same (role, content, tool calls, the call answered).
func sameMessage(a, b memory.WindowMessage) bool {
	return a.Role == b.Role && a.Content == b.Content && a.ToolCallID == b.ToolCallID && a.Name == b.Name &&
		slices.Equal(a.ToolCalls, b.ToolCalls)
}

// checkPairs fails on a tool result without its call or a call without its result.
func checkPairs(t *testing.T, w *memory.ContextResult) {
	t.Helper()
	calls, results := map[string]bool{}, map[string]bool{}
	for _, m := range w.Messages {
		for _, tc := range m.ToolCalls {
			calls[tc.ID] = true
		}
		if m.Role == memory.RoleTool {
			if !calls[m.ToolCallID] {
				t.Fatalf("tool result %s before (or without) its call", m.ID)
			}
			results[m.ToolCallID] = true
		}
	}
	for id := range calls {
		if !results[id] {
			t.Fatalf("call %s without its result", id)
		}
	}
}

// loopSession starts a tool-loop session: a pinned system prompt and a task.
func loopSession(t *testing.T, h *memorytest.Harness, id string) {
	t.Helper()
	window := 16000
	if _, err := h.PutSession(context.Background(), id, memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, id, &memory.Message{Role: memory.RoleSystem, Content: "You are a coding agent. Use bash.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "Make the failing test in tests/test_payments.py pass."})
}

// Between rebuilds a tool loop's window is the previous window, exactly,
// plus the new messages: StablePrefix counts all of the previous window.
// A rebuild happens only when the window would not fit any more, resets
// StablePrefix to the messages that still lead it (system prompt, task),
// and leaves room to grow for the calls after it.
func TestLoopWindowKeepsItsPrefixBetweenRebuilds(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	loopSession(t, h, "s")
	const budget = 3000
	var prev *memory.ContextResult
	var prevStep int // tokens the last step stored cost
	rebuilds, appended := 0, 0
	for i := 1; i <= 60; i++ {
		out := codeOutput(i, 3+i%4)
		res := mustAppend(t, h, "s", step(i, out)...)
		w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: out, MaxTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		checkPairs(t, w)
		if w.Tokens > budget {
			t.Fatalf("step %d: %d tokens over the budget %d", i, w.Tokens, budget)
		}
		if last := w.Messages[len(w.Messages)-1]; last.ID != res.IDs[1] || last.Content != out {
			t.Fatalf("step %d: the window does not end with the newest input, whole: %s", i, last.ID)
		}
		if prev != nil {
			n := 0
			for n < len(prev.Messages) && n < len(w.Messages) && sameMessage(prev.Messages[n], w.Messages[n]) {
				n++
			}
			if w.StablePrefix != n {
				t.Fatalf("step %d: StablePrefix %d, but the first %d messages repeat the previous window", i, w.StablePrefix, n)
			}
			switch {
			case n == len(prev.Messages):
				appended++
			default:
				rebuilds++
				// Only when the previous window plus this step would not fit.
				if prev.Tokens+prevStep <= budget {
					t.Fatalf("step %d: rebuilt (prefix %d of %d) though %d + %d tokens fit %d", i, n, len(prev.Messages), prev.Tokens, prevStep, budget)
				}
				if n != 2 || w.Messages[0].Role != memory.RoleSystem || w.Messages[1].Role != memory.RoleUser {
					t.Fatalf("step %d: a rebuilt window repeats %d messages, want the system prompt and the task", i, n)
				}
				// A rebuild is paid uncached, the calls after it at a
				// tenth: it leaves two thirds of the budget to grow in
				// (at LoopFillPct 0.45 it took 1,293 of 3,000 here).
				if w.Tokens > budget/3 {
					t.Fatalf("step %d: a rebuilt window takes %d of %d tokens: too little room to grow", i, w.Tokens, budget)
				}
			}
		}
		prevStep = 0
		for _, tok := range res.Tokens {
			prevStep += tok
		}
		prev = w
	}
	if rebuilds == 0 || appended < 5*rebuilds {
		t.Fatalf("%d rebuilds, %d windows appended to: want a few rebuilds, each followed by many appends", rebuilds, appended)
	}
}

// A message the stable part shows that is edited rebuilds the window: the
// frozen layout never shows stale text.
func TestLoopWindowRebuiltAfterAnEdit(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	loopSession(t, h, "s")
	var first *memory.AppendResult
	for i := 1; i <= 4; i++ {
		res := mustAppend(t, h, "s", step(i, codeOutput(i, 3))...)
		if first == nil {
			first = res
		}
		if _, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: "next", MaxTokens: 4000}); err != nil {
			t.Fatal(err)
		}
	}
	edited := "the output, corrected"
	if _, err := h.EditMessage(ctx, first.IDs[1], memory.MessageEdit{Content: &edited}); err != nil {
		t.Fatal(err)
	}
	w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: "next", MaxTokens: 4000})
	if err != nil {
		t.Fatal(err)
	}
	got, ok := windowIDs(w)[first.IDs[1]]
	if !ok || got.Content != edited {
		t.Fatalf("the edited output shows as %q, want %q", got.Content, edited)
	}
	at := slices.IndexFunc(w.Messages, func(m memory.WindowMessage) bool { return m.ID == first.IDs[1] })
	if w.StablePrefix > at {
		t.Fatalf("StablePrefix %d, but the edited message is message %d", w.StablePrefix, at)
	}
}

// The user interrupts a tool loop to ask about a name and a number an old
// tool output held, long out of the window: the lines come back in one
// recall block just before the question, which stays the last message;
// the window's messages before the block repeat the previous window.
func TestRecallBlockAnswersAQuestionInAToolLoop(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	loopSession(t, h, "s")
	const budget = 2500
	facts := []string{"payment_retry_limit = 7 in settings/payments.toml", "deploy of build 48213 failed at stage 3"}
	planted := mustAppend(t, h, "s", append(step(-1, "settings read:\n"+facts[0]+"\n"), step(-2, "log:\n"+facts[1]+"\n")...)...)
	var prev *memory.ContextResult
	for i := 1; i <= 40; i++ {
		out := codeOutput(i, 6)
		mustAppend(t, h, "s", step(i, out)...)
		w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: out, MaxTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		prev = w
	}
	for _, m := range prev.Messages {
		if strings.Contains(m.Content, "payment_retry_limit") || strings.Contains(m.Content, "48213") {
			t.Fatalf("a planted line is still in the window (%s): the test needs them out", m.ID)
		}
	}
	for k, q := range []string{"Before the next step: what did the earlier output say about payment_retry_limit?",
		"Which build failed, 48213?"} {
		fact, source := facts[k], planted.IDs[1+2*k]
		asked := mustAppend(t, h, "s", &memory.Message{Role: memory.RoleUser, Content: q})
		w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: q, MaxTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		checkPairs(t, w)
		n := len(w.Messages)
		if w.Messages[n-1].ID != asked.IDs[0] {
			t.Fatalf("%q: the question is not the last message", q)
		}
		block := w.Messages[n-2]
		if block.Kind != memory.KindDigest || block.Source != memory.SourceRecovered || !strings.Contains(block.Content, fact) ||
			!slices.Contains(block.Sources, source) {
			t.Fatalf("%q: no recall block holding the line just before the question: %s %s %q %v", q, block.ID, block.Source, block.Content, block.Sources)
		}
		for _, m := range w.Messages[:n-2] {
			if strings.Contains(m.Content, fact) {
				t.Fatalf("%q: the line shows outside the recall block too (%s)", q, m.ID)
			}
		}
		if w.StablePrefix != len(prev.Messages) {
			t.Fatalf("%q: StablePrefix %d, want the whole previous window (%d messages)", q, w.StablePrefix, len(prev.Messages))
		}
		if w.Tokens > budget {
			t.Fatalf("%q: %d tokens over %d", q, w.Tokens, budget)
		}
		prev = w
	}
}

// An agent's step that names what an old output held (not in the window)
// brings that output's line back before the step's results.
func TestRecallBlockForTheAgentsOwnNames(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	loopSession(t, h, "s")
	mustAppend(t, h, "s", step(0, "def compute_refund_total(order): return order.total - order.fees\n")...)
	for i := 1; i <= 40; i++ {
		mustAppend(t, h, "s", step(i, codeOutput(i, 6))...)
		if _, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: "next", MaxTokens: 2500}); err != nil {
			t.Fatal(err)
		}
	}
	call := []*memory.Message{
		{Role: memory.RoleAssistant, Content: "Check how compute_refund_total is used.",
			ToolCalls: []memory.ToolCall{{ID: "call_x", Type: "function", Function: memory.FunctionCall{Name: "bash", Arguments: `{"command":"grep -rn compute_refund_total src"}`}}}},
		{Role: memory.RoleTool, ToolCallID: "call_x", Content: "(no output)"},
	}
	mustAppend(t, h, "s", call...)
	w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: "(no output)", MaxTokens: 2500})
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, w)
	n := len(w.Messages)
	if w.Messages[n-2].Role != memory.RoleAssistant || w.Messages[n-3].Kind != memory.KindDigest ||
		!strings.Contains(w.Messages[n-3].Content, "def compute_refund_total(order)") {
		t.Fatalf("no recall block before the newest step: %s %q", w.Messages[n-3].ID, w.Messages[n-3].Content)
	}
}

// The gateway's window carries the window builder's StablePrefix, where the
// adapters put the provider's cache breakpoint.
func TestGatewayWindowCarriesStablePrefix(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	g := memory.NewGateway(h.Service)
	history := []*memory.Message{{Role: memory.RoleSystem, Content: "You are a coding agent."},
		{Role: memory.RoleUser, Content: "Fix the failing test."}}
	prev := 0
	for i := 1; i <= 3; i++ {
		history = append(history, step(i, codeOutput(i, 2))...)
		w, err := g.Prepare(context.Background(), memory.GatewayRequest{Session: "gw", History: history, ContextWindow: 16000, Reserve: 2000})
		if err != nil {
			t.Fatal(err)
		}
		if w.StablePrefix != prev {
			t.Fatalf("call %d: StablePrefix %d, want the previous window's %d messages", i, w.StablePrefix, prev)
		}
		prev = len(w.Messages)
	}
}

// In a session longer than the tail's reach (the newest 384 messages), a
// user's question still brings back the early output that answers it.
func TestRecallBlockBeyondTheTailsReach(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	loopSession(t, h, "s")
	fact := "vault path secret/payments/stagingDbKey holds the staging_db_secret"
	planted := mustAppend(t, h, "s", step(0, fact)...)
	var batch []*memory.Message
	for i := 1; i <= 200; i++ {
		batch = append(batch, step(i, fmt.Sprintf("ok %d", i))...)
		if len(batch) == 40 {
			mustAppend(t, h, "s", batch...)
			batch = nil
		}
	}
	q := "What did the early output say about staging_db_secret?"
	mustAppend(t, h, "s", &memory.Message{Role: memory.RoleUser, Content: q})
	w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: q, MaxTokens: 3000})
	if err != nil {
		t.Fatal(err)
	}
	block := w.Messages[len(w.Messages)-2]
	if block.Kind != memory.KindDigest || !strings.Contains(block.Content, fact) || !slices.Contains(block.Sources, planted.IDs[1]) {
		t.Fatalf("the early output is not recalled: %s %q", block.ID, block.Content)
	}
}

// A user's question to a tool loop whose window is nearly full is answered
// in the window extended, not rebuilt (a cache miss), when what it recalls
// fits in the room left, even though that room is under the share a window
// built afresh would leave the recall.
func TestQuestionRecallFitsAnExtendedWindow(t *testing.T) {
	h := memorytest.Open(t)
	ctx := context.Background()
	loopSession(t, h, "s")
	const budget = 2500
	share := int(memory.LoopRecallShare * budget)
	fact := "payment_retry_limit = 7 in settings/payments.toml"
	planted := mustAppend(t, h, "s", step(-1, "settings read:\n"+fact+"\n")...)
	q := &memory.Message{Role: memory.RoleUser, Content: "What did the earlier output say about payment_retry_limit?"}
	var prev *memory.ContextResult
	for i := 1; ; i++ {
		if i > 400 {
			t.Fatal("no window left between 200 tokens and the recall's share free: the test needs one")
		}
		out := codeOutput(i, 1+i%3)
		mustAppend(t, h, "s", step(i, out)...)
		w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: out, MaxTokens: budget})
		if err != nil {
			t.Fatal(err)
		}
		prev = w
		if free := budget - w.Tokens; i > 40 && free >= 200 && free < share-40 {
			break
		}
	}
	for _, m := range prev.Messages {
		if strings.Contains(m.Content, "payment_retry_limit") {
			t.Fatalf("the planted line is still in the window (%s): the test needs it out", m.ID)
		}
	}
	asked := mustAppend(t, h, "s", q)
	w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: q.Content, MaxTokens: budget})
	if err != nil {
		t.Fatal(err)
	}
	checkPairs(t, w)
	n := len(w.Messages)
	if w.Messages[n-1].ID != asked.IDs[0] {
		t.Fatal("the question is not the last message")
	}
	if block := w.Messages[n-2]; block.Kind != memory.KindDigest || !strings.Contains(block.Content, fact) || !slices.Contains(block.Sources, planted.IDs[1]) {
		t.Fatalf("no recall block holding the line before the question: %s %q", block.ID, block.Content)
	}
	if w.StablePrefix != len(prev.Messages) {
		t.Fatalf("StablePrefix %d of the previous window's %d messages: rebuilt (%d of %d tokens were free, the recall's share is %d)",
			w.StablePrefix, len(prev.Messages), budget-prev.Tokens, budget, share)
	}
	if w.Tokens > budget {
		t.Fatalf("%d tokens over %d", w.Tokens, budget)
	}
}
