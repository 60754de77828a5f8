package main

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// --chat replays each conversation of a turns file as a chat: a context
// call before each of the second speaker's turns, with the cache figures.
func TestEvalChat(t *testing.T) {
	t.Parallel()
	convs, err := loadTurns(ctxTurns)
	if err != nil {
		t.Fatal(err)
	}
	answers := 0
	for _, c := range convs {
		msgs, _, err := evalMessages(c)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if m.Role == "assistant" {
				answers++
			}
		}
	}
	rep, err := runAgentEval(context.Background(), agentOptions{Runs: ctxTurns, Chat: true, Window: 2000, Budget: 1500})
	if err != nil {
		t.Fatal(err)
	}
	f := figureMap(rep)
	checkFigures(t, "chat", f, map[string]any{"runs": len(convs), "context_calls": answers, "invalid_pairs": 0,
		"over_budget_windows": 0, "latest_present_pct": 100.0})
	if c, _ := f["cached_prefix_pct"].(float64); c <= 0 {
		t.Errorf("cached prefix %v%%: a chat's windows repeat their working window", f["cached_prefix_pct"])
	}
}

// --stored-prompt stores each question before its context call and
// deletes it after: the sessions end as they were, with the same turns.
func TestEvalContextStoredPrompt(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "results.jsonl")
	rep, err := runEval(context.Background(), evalOptions{Turns: ctxTurns, Questions: ctxQuestions, Out: out,
		Ks: []int{1, 5}, Server: ts.URL, Mode: "hybrid", SkipAdversarial: true,
		Context: true, Window: 600, Budget: 300, ContextBatch: 2, StoredPrompt: true})
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	r := rep.Context
	if len(r.Questions) != 8 || r.OverBudget != 0 || r.BadMessages != 0 {
		t.Fatalf("%d questions, %d over budget, %d turns not as sent", len(r.Questions), r.OverBudget, r.BadMessages)
	}
	for _, c := range r.Convs {
		if c.ReachableEnd != c.Turns {
			t.Errorf("%s: %d of %d turns reachable at the end", c.Conv, c.ReachableEnd, c.Turns)
		}
		// The questions stored were deleted: every message left is a turn
		// or a summary.
		for m, err := range ts.api.Messages(context.Background(), c.Session, []string{"active", "recovered", "dropped", "summarized"}, 100) {
			if err != nil {
				t.Fatal(err)
			}
			if m.Kind != memory.KindSummary && turnIDOf(m.Metadata) == "" {
				t.Errorf("%s: %s %q left in the session", c.Session, m.ID, m.Content)
			}
		}
	}
}
