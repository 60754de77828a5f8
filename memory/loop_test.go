package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// step is one agent step: an assistant call and its result.
func step(i int, output string) []*memory.Message {
	id := fmt.Sprintf("call_%d", i)
	return []*memory.Message{
		{Role: memory.RoleAssistant, Content: fmt.Sprintf("step %d: looking further", i),
			ToolCalls: []memory.ToolCall{{ID: id, Type: "function", Function: memory.FunctionCall{Name: "bash", Arguments: fmt.Sprintf(`{"command":"cat src/mod_%d.py"}`, i)}}}},
		{Role: memory.RoleTool, ToolCallID: id, Content: output},
	}
}

// codeOutput is a file listing of n lines that names identifiers.
func codeOutput(i, n int) string {
	var b strings.Builder
	for k := 0; k < n; k++ {
		fmt.Fprintf(&b, "    def handler_%d_%d(self, request_obj): return self.resolve_name(request_obj)  # line %d\n", i, k, k)
	}
	return b.String()
}

func mustAppend(t *testing.T, h *memorytest.Harness, session string, msgs ...*memory.Message) *memory.AppendResult {
	t.Helper()
	res, err := h.Append(context.Background(), session, msgs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func windowIDs(res *memory.ContextResult) map[string]memory.WindowMessage {
	out := map[string]memory.WindowMessage{}
	for _, m := range res.Messages {
		out[m.ID] = m
	}
	return out
}

// A tool result larger than the whole window: the write keeps the session
// under the hard limit, the window holds the turn cut head + tail with a
// marker naming the original, and the original stays whole.
func TestOversizedToolResultIsCutNotLost(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	window := 2000
	if _, err := h.PutSession(ctx, "s", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, "s", &memory.Message{Role: memory.RoleSystem, Content: "You are a coding agent.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "Fix the failing test in src/app.py"})
	huge := "FIRST LINE of the output\n" + codeOutput(1, 300) + "LAST LINE of the output"
	res := mustAppend(t, h, "s", step(1, huge)...)
	if res.Session.Tokens > int(0.85*float64(window)) {
		t.Fatalf("after the write the session holds %d tokens, over 85%% of %d", res.Session.Tokens, window)
	}
	resultID := res.IDs[1]
	for _, max := range []int{1500, 700} {
		w, err := h.Context(ctx, "s", memory.ContextRequest{Prompt: "what next?", MaxTokens: max})
		if err != nil {
			t.Fatalf("max_tokens %d: %v", max, err)
		}
		got, ok := windowIDs(w)[resultID]
		if !ok || windowIDs(w)[res.IDs[0]].Message == nil {
			t.Fatalf("max_tokens %d: the turn being answered is not in the window", max)
		}
		if !strings.HasPrefix(got.Content, "FIRST LINE") || !strings.HasSuffix(got.Content, "LAST LINE of the output") ||
			!strings.Contains(got.Content, "GET /v1/messages/"+resultID) {
			t.Fatalf("max_tokens %d: the result is not cut head + tail with a marker: %.200q", max, got.Content)
		}
		sum := w.Budget.PromptTokens + memory.ReplyPriming
		for _, m := range w.Messages {
			sum += m.Tokens
		}
		if sum != w.Budget.Used || w.Budget.Used > max {
			t.Fatalf("max_tokens %d: messages cost %d, budget says %d", max, sum, w.Budget.Used)
		}
	}
	orig, err := h.Message(ctx, resultID)
	if err != nil || orig.Content != huge {
		t.Fatalf("the stored original is not whole: %v", err)
	}
	// Not even the cut fits: a 409 that says what would.
	_, err = h.Context(ctx, "s", memory.ContextRequest{Prompt: "next", MaxTokens: 60})
	if memory.ErrorCode(err) != memory.ECONFLICT || !strings.Contains(memory.ErrorMessage(err), "raise max_tokens to at least") {
		t.Fatalf("a budget too small for the current turn: %v", err)
	}
}

// A long simulated coding session: large outputs, a pinned note on every
// flush prompt. Every write leaves the session under the hard limit, every
// compaction that summarizes or drops comes after a flush prompt (or says
// none could be offered), the session keeps one live summary, no context
// call fails, and an early fact stays recoverable.
func TestLongToolLoopConverges(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("300 steps")
	}
	h := memorytest.Open(t)
	ctx := context.Background()
	window := 16000
	if _, err := h.PutSession(ctx, "loop", memory.SessionUpdate{ContextWindow: &window}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, h, "loop", &memory.Message{Role: memory.RoleSystem, Content: "You are a coding agent. Use bash.", Pinned: true},
		&memory.Message{Role: memory.RoleUser, Content: "Make the test suite of the payments service pass."})
	facts := map[string]string{ // query -> what the early output said
		"staging database secret vault":   "the staging database secret is kept in vault path secret/payments/stagingDbKey",
		"payment_retry_limit in settings": "payment_retry_limit = 7 in settings/payments.toml",
		"currency rounding bug ticket":    "the currency rounding bug is ticket PAY-4412, fixed in roundHalfEven()",
	}
	k := 0
	for _, fact := range facts {
		mustAppend(t, h, "loop", step(1000+k, "config: "+fact)...)
		k++
	}
	stored, written, compactions, notes, flushPending := 2+2*len(facts), 0, 0, 0, false
	for i := 1; i <= 150; i++ {
		out := codeOutput(i, 5+(i*37)%120)
		if i%25 == 0 {
			out = codeOutput(i, 900) // a very large output now and then
		}
		w, err := h.Context(ctx, "loop", memory.ContextRequest{Prompt: out[:min(len(out), 400)], MaxTokens: 12000})
		if err != nil {
			t.Fatalf("step %d: context: %v", i, err)
		}
		if w.Budget.Used > 12000 {
			t.Fatalf("step %d: window costs %d", i, w.Budget.Used)
		}
		msgs := step(i, out)
		if flushPending {
			msgs = append(msgs, &memory.Message{Role: memory.RoleUser, Pinned: true, Content: fmt.Sprintf("note %d: tests in src/mod_%d.py still fail", notes, i)})
			notes++
			flushPending = false
		}
		res := mustAppend(t, h, "loop", msgs...)
		stored += len(msgs)
		for _, n := range res.Tokens {
			written += n
		}
		if res.Session.Tokens > int(0.85*float64(window)) {
			t.Fatalf("step %d: the session holds %d tokens after a write, over the hard limit", i, res.Session.Tokens)
		}
		if c := res.Compaction; c != nil && (len(c.Dropped) > 0 || len(c.Summarized) > 0) {
			compactions++
			if c.FlushOffered == nil || (!*c.FlushOffered && len(c.Notes) == 0) {
				t.Fatalf("step %d: a compaction dropped content with no flush offered and no note: %+v", i, c)
			}
		}
		if res.Session.FlushPrompt != "" {
			flushPending = true
		}
	}
	st, err := h.GetSession(ctx, "loop")
	if err != nil {
		t.Fatal(err)
	}
	if st.Summaries > 1 {
		t.Errorf("%d summaries; a session's summary rolls", st.Summaries)
	}
	if notes == 0 || compactions == 0 {
		t.Fatalf("%d flush notes, %d compactions: the session never reached its trigger", notes, compactions)
	}
	// The floor the hysteresis band allows: every (trigger - target) tokens
	// written force a compaction, unless pruning absorbs them.
	pol := memory.DefaultPolicy
	floor := float64(written) / ((pol.TriggerPct - pol.TargetPct) * float64(window))
	if float64(st.Compactions) > floor/2 {
		t.Errorf("%d compactions for %d tokens written: the band alone would allow %.0f", st.Compactions, written, floor)
	}
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for query, fact := range facts {
		hits, err := h.Search(ctx, memory.SearchRequest{Query: query, Sessions: []string{"loop"}, K: 5})
		found := -1
		for i, hit := range hits {
			if !hit.IsSummary() && strings.Contains(hit.Content, fact) {
				found = i
				break
			}
		}
		if err != nil || found < 0 {
			t.Errorf("the early fact %q is not in the top 5: %v", fact, err)
			continue
		}
		// recoverable whole, by id, wherever it is
		got, err := h.Message(ctx, hits[found].ID)
		if err != nil || !strings.Contains(got.Content, fact) {
			t.Errorf("the early fact %q cannot be read back by id: %v", fact, err)
		}
	}
	// The cold mirror holds one line per original that went cold, each once.
	chunks, err := h.Cold.Read("default", "loop")
	if err != nil {
		t.Fatal(err)
	}
	cold, _, err := h.ListCold(ctx, "loop", "", 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]int{}
	for _, c := range chunks {
		lines[c.ChunkID]++
	}
	for id, n := range lines {
		if n != 1 {
			t.Errorf("message %s has %d lines in the cold mirror", id, n)
		}
	}
	for _, m := range cold {
		if lines[m.ID] != 1 && !m.IsSummary() {
			t.Errorf("cold original %s has %d lines in the cold mirror", m.ID, lines[m.ID])
		}
	}
	if len(cold) == 0 {
		t.Fatal("nothing went cold")
	}
}

// BenchmarkLoopContext is a context call early in a tool loop (5 steps) and
// late (120): the cost of a call must stay flat in history.
func BenchmarkLoopContext(b *testing.B) {
	for _, steps := range []int{5, 120} {
		b.Run(fmt.Sprintf("steps=%d", steps), func(b *testing.B) {
			h := memorytest.Open(b)
			ctx := context.Background()
			window := 16000
			if _, err := h.PutSession(ctx, "b", memory.SessionUpdate{ContextWindow: &window}); err != nil {
				b.Fatal(err)
			}
			if _, err := h.Append(ctx, "b", []*memory.Message{{Role: memory.RoleSystem, Content: "You are a coding agent.", Pinned: true},
				{Role: memory.RoleUser, Content: "Fix the bug in src/app.py"}}); err != nil {
				b.Fatal(err)
			}
			for i := 0; i < steps; i++ {
				if _, err := h.Append(ctx, "b", step(i, codeOutput(i, 3+(i*7)%40))); err != nil {
					b.Fatal(err)
				}
			}
			prompt := codeOutput(steps, 20)
			b.ResetTimer()
			for b.Loop() {
				if _, err := h.Context(ctx, "b", memory.ContextRequest{Prompt: prompt, MaxTokens: 12000}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// The prompt an agent in a loop sends is the input it just stored: it is
// counted once, as that message; another prompt is counted on its own.
func TestPromptStoredIsCountedOnce(t *testing.T) {
	t.Parallel()
	h := memorytest.Open(t)
	ctx := context.Background()
	out := codeOutput(1, 30)
	mustAppend(t, h, "p", &memory.Message{Role: memory.RoleUser, Content: "Fix src/app.py"})
	mustAppend(t, h, "p", step(1, out)...)
	for _, tc := range []struct {
		prompt string
		stored bool
	}{{out, true}, {out[:200], true}, {"something else entirely", false}} {
		w, err := h.Context(ctx, "p", memory.ContextRequest{Prompt: tc.prompt, MaxTokens: 8000})
		if err != nil {
			t.Fatal(err)
		}
		if (w.Budget.PromptTokens == 0) != tc.stored {
			t.Errorf("prompt %.30q: prompt_tokens %d, stored %v", tc.prompt, w.Budget.PromptTokens, tc.stored)
		}
		sum := w.Budget.PromptTokens + memory.ReplyPriming
		for _, m := range w.Messages {
			sum += m.Tokens
		}
		if sum != w.Budget.Used {
			t.Errorf("prompt %.30q: messages and prompt cost %d, used says %d", tc.prompt, sum, w.Budget.Used)
		}
	}
}
