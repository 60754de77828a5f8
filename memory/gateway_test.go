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

func TestGatewaySessionID(t *testing.T) {
	t.Parallel()
	hashed := memory.GatewaySessionID("", "", "be terse", "first question")
	for _, tc := range []struct {
		name                             string
		named, user, system, first, want string
	}{
		{"HeaderWins", "mine", "u1", "s", "q", "mine"},
		{"SameConversationSameHash", "", "", "be terse", "first question", hashed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memory.GatewaySessionID(tc.named, tc.user, tc.system, tc.first); got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("UserNotAnID", func(t *testing.T) {
		got := memory.GatewaySessionID("", "ann@example.com", "s", "q")
		if !strings.HasPrefix(got, "gw-user-") || memory.ValidateSessionID(got) != nil {
			t.Fatalf("got %q, want a valid gw-user- id", got)
		}
	})
	// A client's id names each of its conversations apart: its side calls
	// (a title) and subagents carry the same id.
	t.Run("UserAndConversation", func(t *testing.T) {
		main := memory.GatewaySessionID("", "agent-7", "You are a coding agent.", "fix the test")
		if again := memory.GatewaySessionID("", "agent-7", "You are a coding agent.", "fix the test"); again != main {
			t.Fatalf("one conversation, two sessions: %q and %q", main, again)
		}
		for _, other := range []string{
			memory.GatewaySessionID("", "agent-7", "Write a 5-word title.", "fix the test"),
			memory.GatewaySessionID("", "agent-7", "You are a coding agent.", "find the failing test"),
			memory.GatewaySessionID("", "agent-8", "You are a coding agent.", "fix the test"),
		} {
			if other == main || memory.ValidateSessionID(other) != nil {
				t.Fatalf("another conversation got %q (the main one %q)", other, main)
			}
		}
	})
	t.Run("OtherConversationOtherHash", func(t *testing.T) {
		if got := memory.GatewaySessionID("", "", "be terse", "another question"); got == hashed || memory.ValidateSessionID(got) != nil {
			t.Fatalf("got %q (the other conversation's %q)", got, hashed)
		}
	})
}

func TestGatewayModelWindow(t *testing.T) {
	t.Parallel()
	for model, want := range map[string]int{"gpt-4o-mini-2024-07-18": 128_000, "gpt-4-turbo": 128_000, "gpt-4-0613": 8_192,
		"gpt-4.1-mini": 1_047_576, "claude-sonnet-4-5": 200_000, "o4-mini": 200_000} {
		if got, ok := memory.ModelWindow(model); !ok || got != want {
			t.Errorf("ModelWindow(%q) = %d, %v; want %d", model, got, ok, want)
		}
	}
	if _, ok := memory.ModelWindow("llama3:8b"); ok {
		t.Error("an unknown model has a window")
	}
}

// The gateway's calibrations are bounded: a server that sees ever new
// sessions does not keep one for each forever, and a calibration still
// takes after the table started over.
func TestGatewayCalibrationsBounded(t *testing.T) {
	t.Parallel()
	g := memory.NewGateway(&memory.Service{})
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	for i := range memory.MaxRatios + 10 {
		g.Calibrate(ctx, fmt.Sprintf("s%d", i), 100, 130)
	}
	if n := g.Ratios(); n > memory.MaxRatios || n == 0 {
		t.Fatalf("%d calibrations kept, bound %d", n, memory.MaxRatios)
	}
}

// A provider that counts a window as ctxd does (or fewer) leaves a new
// session uncalibrated: the margin is for a tokenizer that counts more, and
// on an OpenAI model it would leave part of every window empty. One that
// counts more gets its ratio with the margin, within the bounds. A lower
// report brings a ratio only a quarter of the way down: one window ctxd
// over-counted reset the ratio to 1, and the next overfilled.
func TestGatewayCalibrationRatio(t *testing.T) {
	t.Parallel()
	g := memory.NewGateway(&memory.Service{})
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	r := 1.3 * 1.05
	down := func(target float64) float64 { r -= (r - target) / 4; return r }
	for _, tc := range []struct {
		sent, reported int
		want           float64
	}{
		{1000, 1000, 1}, {1000, 900, 1}, {1000, 1300, 1.3 * 1.05}, {1000, 1000, down(1)}, {1000, 900, down(1)},
		{1000, 1400, 1.4 * 1.05},
		{100, 1000, 4}, {0, 1000, 4}, // nothing sent: nothing learnt, the ratio before stays
	} {
		g.Calibrate(ctx, "s", tc.sent, tc.reported)
		if got := g.Ratio("t", "s"); got < tc.want-1e-9 || got > tc.want+1e-9 {
			t.Errorf("after sent %d, reported %d: ratio %v, want %v", tc.sent, tc.reported, got, tc.want)
		}
	}
	if got := g.Ratio("other", "s"); got != 1 {
		t.Errorf("another tenant's session has ratio %v", got)
	}
}

// The newest input is counted once in the window even when a flush turn's
// notes were stored after it: counted again as a prompt, it took its size
// twice from the budget, and the next calibration reset.
func TestGatewayNotesDoNotRecountTheInput(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	g := memory.NewGateway(h.Service)
	input := "the tool's output: " + strings.Repeat("checksum ok. ", 200)
	if _, err := h.Append(ctx, "s", []*memory.Message{{Role: memory.RoleUser, Content: "read it"}, {Role: memory.RoleUser, Content: input}}); err != nil {
		t.Fatal(err)
	}
	if err := g.SaveNotes(ctx, "s", []string{"the task: read it"}); err != nil {
		t.Fatal(err)
	}
	res, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: input, MaxTokens: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if res.Budget.PromptTokens != 0 {
		t.Fatalf("the input was counted again as a %d-token prompt", res.Budget.PromptTokens)
	}
}

// A client that clears its old tool outputs (opencode with a context
// limit) resends a history whose results differ from the stored ones: the
// results are the ones their call ids name, so nothing is superseded and
// only the new messages are stored.
func TestGatewayClearedToolOutputsMatch(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	g := memory.NewGateway(h.Service)
	call := func(id string) *memory.Message {
		return &memory.Message{Role: memory.RoleAssistant, ToolCalls: []memory.ToolCall{{ID: id, Type: "function",
			Function: memory.FunctionCall{Name: "read", Arguments: `{"path":"` + id + `"}`}}}}
	}
	history := []*memory.Message{{Role: memory.RoleUser, Content: "read the files"}, call("c1"),
		{Role: memory.RoleTool, ToolCallID: "c1", Content: strings.Repeat("line of c1\n", 50)}}
	if _, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: history, ContextWindow: 16000, Reserve: 1000}); err != nil {
		t.Fatal(err)
	}
	resent := []*memory.Message{{Role: memory.RoleUser, Content: "read the files"}, call("c1"),
		{Role: memory.RoleTool, ToolCallID: "c1", Content: "[Old tool result content cleared]"},
		call("c2"), {Role: memory.RoleTool, ToolCallID: "c2", Content: "line of c2"}}
	w, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: resent, ContextWindow: 16000, Reserve: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if w.Stored != 2 || len(w.Superseded) != 0 {
		t.Fatalf("stored %d and superseded %v, want the 2 new messages stored and nothing superseded", w.Stored, w.Superseded)
	}
	for _, m := range w.Messages {
		if m.ToolCallID == "c1" && !strings.Contains(m.Content, "line of c1") {
			t.Fatalf("the window sends c1's result as %q, not the stored original", m.Content)
		}
	}
}

// The gateway matches a resent history against what its own last call
// left of the session without reading the store, and reads it again after
// any other write: an answer it stored is matched, and a message deleted
// through the API is no longer.
func TestGatewayIncrementalMatching(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	g := memory.NewGateway(h.Service)
	history := []*memory.Message{{Role: memory.RoleUser, Content: "hello"}}
	prepare := func(want int) {
		t.Helper()
		w, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: history, ContextWindow: 16000, Reserve: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if w.Stored != want || len(w.Superseded) != 0 {
			t.Fatalf("stored %d, superseded %v; want %d stored, none superseded", w.Stored, w.Superseded, want)
		}
	}
	prepare(1)
	for i := range 3 {
		answer := &memory.Message{Role: memory.RoleAssistant, Content: fmt.Sprintf("answer %d", i)}
		if _, err := g.StoreAnswer(ctx, "s", answer); err != nil {
			t.Fatal(err)
		}
		history = append(history, &memory.Message{Role: memory.RoleAssistant, Content: answer.Content},
			&memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("question %d", i)})
		prepare(1)
	}
	// The newest question deleted through the API: the resent history
	// stores it again, as it would after reading the store.
	msgs, err := h.Store.Messages(ctx, "t", "s", memory.MessageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.DeleteMessage(ctx, msgs[len(msgs)-1].ID, false); err != nil {
		t.Fatal(err)
	}
	prepare(1)
}

// A client that rewrites an earlier message slightly (a reminder's date)
// does not make ctxd store its history again; a real edit, or an edit of
// the newest message (the user's new question), still diverges.
func TestGatewaySlightEditsMatch(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	g := memory.NewGateway(h.Service)
	reminder := "<reminder>today is 2026-11-27</reminder> " + strings.Repeat("Read every file in this directory. ", 10)
	history := []*memory.Message{{Role: memory.RoleUser, Content: reminder}, {Role: memory.RoleAssistant, Content: "reading them"},
		{Role: memory.RoleUser, Content: "go on"}}
	prepare := func(h []*memory.Message) *memory.GatewayWindow {
		t.Helper()
		w, err := g.Prepare(ctx, memory.GatewayRequest{Session: "s", History: h, ContextWindow: 16000, Reserve: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	prepare(history)
	edited := append([]*memory.Message{{Role: memory.RoleUser, Content: strings.Replace(reminder, "27", "28", 1)}}, history[1:]...)
	edited = append(edited, &memory.Message{Role: memory.RoleUser, Content: "and the last one"})
	if w := prepare(edited); w.Stored != 1 || len(w.Superseded) != 0 {
		t.Fatalf("a date changed in the first message: stored %d, superseded %v; want 1 stored, none superseded", w.Stored, w.Superseded)
	}
	rewritten := append([]*memory.Message{{Role: memory.RoleUser, Content: "Summarize the files instead."}}, edited[1:]...)
	if w := prepare(rewritten); len(w.Superseded) == 0 {
		t.Fatal("a rewritten first message was taken for the stored one")
	}
	last := slices.Clone(rewritten)
	last[len(last)-1] = &memory.Message{Role: memory.RoleUser, Content: "and the last two"}
	if w := prepare(last); len(w.Superseded) != 1 {
		t.Fatalf("the newest message edited: superseded %v, want the stored one", w.Superseded)
	}
}

// An upstream's answer that carries the session past the compaction
// trigger tells no one (the client never sees that write's status): the
// next call's write is the one that is due a flush, and the compaction
// waits for it. Told on the answer's write, the next write compacted at
// once and the gateway's flush turn never ran.
func TestGatewayFlushDueAfterAnAnswerCrossed(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := memory.NewContextWithTenant(context.Background(), "t")
	g := memory.NewGateway(h.Service)
	history := []*memory.Message{{Role: memory.RoleSystem, Content: "You are a coding agent."}, {Role: memory.RoleUser, Content: "write the report"}}
	req := memory.GatewayRequest{Session: "s", History: history, ContextWindow: 4000, Reserve: 500}
	for step := range 6 {
		w, err := g.Prepare(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if w.FlushDue || w.Compacted {
			t.Fatalf("step %d: flush due %v, compacted %v before any answer crossed the trigger", step, w.FlushDue, w.Compacted)
		}
		var report strings.Builder
		for i := range 80 {
			fmt.Fprintf(&report, "part %d step %d wrote %d rows to table t%d.\n", step, i, (step*80+i)*7919%10007, i)
		}
		answer := &memory.Message{Role: memory.RoleAssistant, Content: report.String()}
		if _, err := g.StoreAnswer(ctx, "s", answer); err != nil {
			t.Fatal(err)
		}
		req.History = append(req.History, &memory.Message{Role: memory.RoleAssistant, Content: answer.Content},
			&memory.Message{Role: memory.RoleUser, Content: fmt.Sprintf("and part %d?", step+1)})
		st, err := h.GetSession(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if st.Tokens <= 2000 { // the trigger: half the window
			continue
		}
		if w, err = g.Prepare(ctx, req); err != nil {
			t.Fatal(err)
		}
		if st, err = h.GetSession(ctx, "s"); err != nil {
			t.Fatal(err)
		}
		if !w.FlushDue || w.Compacted || st.Compactions != 0 {
			t.Fatalf("flush due %v, compacted %v (%d compactions): want the flush due and the compaction waiting for it", w.FlushDue, w.Compacted, st.Compactions)
		}
		return
	}
	t.Fatal("no answer crossed the trigger")
}
