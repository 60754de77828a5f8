package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fixture context_*.jsonl is synthetic: one conversation of 60 turns
// (about 1,900 tokens) in 6 sessions, and 9 questions (one adversarial)
// whose evidence is spread from the first session to the last. A 600-token
// window holds a fraction of it, so the session compacts many times.
var (
	ctxTurns     = filepath.Join("testdata", "eval", "context_turns.jsonl")
	ctxQuestions = filepath.Join("testdata", "eval", "context_questions.jsonl")
)

func TestEvalContext(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "results.jsonl")
	rep, err := runEval(context.Background(), evalOptions{Turns: ctxTurns, Questions: ctxQuestions, Out: out,
		Ks: []int{1, 5}, Server: ts.URL, Mode: "hybrid", SkipAdversarial: true,
		Context: true, Window: 600, Budget: 300, ContextBatch: 2})
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	r := rep.Context
	if r == nil {
		t.Fatal("no evidence-in-window report")
	}

	// Every category score.py reports, for ctxd and both baselines.
	wantN := map[string]int{"single-hop": 5, "multi-hop": 1, "temporal": 1, "open-domain": 1, "OVERALL": 8}
	if !slices.Equal(r.Cats, []string{"single-hop", "multi-hop", "temporal", "open-domain", "OVERALL"}) {
		t.Errorf("categories %v", r.Cats)
	}
	for cat, n := range wantN {
		if r.Counts[cat] != n {
			t.Errorf("%s: n = %d, want %d", cat, r.Counts[cat], n)
		}
		for m := range ctxMethods {
			if v := r.pct(cat, m); v < 0 || v > 100 {
				t.Errorf("%s %s: %v is not a percentage", cat, ctxMethodNames[m], v)
			}
		}
	}
	if len(r.Questions) != 8 || len(r.Latencies) != 8 {
		t.Fatalf("%d questions, %d context calls; want 8 (the adversarial one skipped)", len(r.Questions), len(r.Latencies))
	}
	for _, q := range r.Questions {
		for m := range ctxMethods {
			if q.Used[m] <= 0 || q.Used[m] > 300 {
				t.Errorf("qid %s: %s window costs %d tokens, want 1..300", q.QID, ctxMethodNames[m], q.Used[m])
			}
		}
	}
	if r.OverBudget != 0 || r.BadMessages != 0 {
		t.Errorf("%d answers over budget, %d turns not as sent", r.OverBudget, r.BadMessages)
	}

	// The baselines differ as they must: the newest turns hold the last
	// question's evidence and none of the first session's; BM25 finds the
	// parrot's name wherever it is.
	q0, q8 := r.Questions[0], r.Questions[7]
	if q0.QID != "0" || q8.QID != "8" {
		t.Fatalf("questions out of order: %s, %s", q0.QID, q8.QID)
	}
	if len(q0.Found[ctxMethodSliding]) != 0 || len(q8.Found[ctxMethodSliding]) == 0 {
		t.Errorf("sliding window: qid 0 found %v (want none), qid 8 found %v (want some)",
			q0.Found[ctxMethodSliding], q8.Found[ctxMethodSliding])
	}
	if !slices.Contains(q0.Found[ctxMethodBM25], "D1:4") {
		t.Errorf("bm25-pack: qid 0 found %v, want D1:4", q0.Found[ctxMethodBM25])
	}

	// The first session was compacted away long before the questions; the
	// context call brings the parrot's turn back, verbatim.
	// (Sent, and moved back into the working window unless that would pass
	// the trigger while a compaction waits for the agent's flush.)
	if !slices.Contains(q0.Found[ctxMethodCtxd], "D1:4") || q0.Source["D1:4"] != "recovered" {
		t.Errorf("ctxd: qid 0 found %v, recovered %v, sources %v; want D1:4 recovered into the window",
			q0.Found[ctxMethodCtxd], q0.Recov, q0.Source)
	}

	// --misses lists exactly the questions with evidence missing from
	// ctxd's window, naming the turns.
	var misses strings.Builder
	r.writeMisses(&misses)
	listed := 0
	for _, q := range r.Questions {
		line := "miss q" + q.QID + " "
		if got := strings.Contains(misses.String(), line); got != (len(q.Missing) > 0) {
			t.Errorf("question %s: listed %v, missing %v:\n%s", q.QID, got, q.Missing, misses.String())
		}
		if len(q.Missing)+len(q.Found[ctxMethodCtxd]) != q.Evidence {
			t.Errorf("question %s: %d missing + %d found != %d evidence", q.QID, len(q.Missing), len(q.Found[ctxMethodCtxd]), q.Evidence)
		}
		if len(q.Missing) > 0 {
			listed++
		}
	}
	if strings.Count(misses.String(), "\n") != listed {
		t.Errorf("%d lines for %d questions with misses:\n%s", strings.Count(misses.String(), "\n"), listed, misses.String())
	}

	if len(r.Convs) != 1 {
		t.Fatalf("%d ctx sessions, want 1", len(r.Convs))
	}
	s := r.Convs[0]
	if s.Session != "ctx-syn-long" || s.Turns != 60 || s.Writes != 30 {
		t.Errorf("session %s: %d turns in %d writes; want ctx-syn-long, 60 in 30", s.Session, s.Turns, s.Writes)
	}
	if s.CompactionsIngest == 0 || s.Compactions < s.CompactionsIngest || s.CompactionErrors != 0 {
		t.Errorf("compactions: %d during ingest, %d in all, %d failed; want some, none failed",
			s.CompactionsIngest, s.Compactions, s.CompactionErrors)
	}
	if s.HardLimit != 510 || s.MaxTokensWrites == 0 || s.MaxTokensWrites >= s.HardLimit || s.MaxTokensQuestions >= s.HardLimit || s.OverLimit != 0 {
		t.Errorf("window: max %d (writes), %d (questions), hard limit %d, %d answers over it",
			s.MaxTokensWrites, s.MaxTokensQuestions, s.HardLimit, s.OverLimit)
	}
	if s.ReachableIngest != 60 || s.ReachableEnd != 60 || s.Evidence != 11 || s.EvidenceReachable != 11 {
		t.Errorf("reachable: %d and %d of 60 turns, %d of %d evidence turns; want all",
			s.ReachableIngest, s.ReachableEnd, s.EvidenceReachable, s.Evidence)
	}
	if s.States["dropped"]+s.States["summarized"] == 0 {
		t.Errorf("states at the end %v: nothing cold", s.States)
	}

	// The session is the server's, as the report says.
	st := ts.sessionStatus(t, "ctx-syn-long")
	if got := st["compactions"]; got != float64(s.Compactions) {
		t.Errorf("server counts %v compactions, report %d", got, s.Compactions)
	}

	var text, js bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# evidence in window", "ctxd   sliding bm25-pack", "ctx-syn-long: 60 turns in 30 writes",
		"reachable 60/60 (100.00%) after ingest"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Context struct {
			Table    map[string]map[string]float64 `json:"table"`
			Sessions []struct {
				ReachablePct float64 `json:"reachable_pct"`
			} `json:"sessions"`
			Questions []json.RawMessage `json:"questions"`
		} `json:"context"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatalf("--json: %v\n%s", err, js.Bytes())
	}
	if row := doc.Context.Table["OVERALL"]; row["n"] != 8 || row["ctxd"] != r.pct("OVERALL", ctxMethodCtxd) {
		t.Errorf("--json OVERALL %v", row)
	}
	if len(doc.Context.Sessions) != 1 || doc.Context.Sessions[0].ReachablePct != 100 || len(doc.Context.Questions) != 8 {
		t.Errorf("--json sessions %+v, %d questions", doc.Context.Sessions, len(doc.Context.Questions))
	}
}

func TestEvalContextFlags(t *testing.T) {
	t.Parallel()
	f := newEvalCmd().Flags()
	for name, want := range map[string]string{"window": "4096", "budget": "2048", "no-context": "false", "context-batch": "2"} {
		if fl := f.Lookup(name); fl == nil || fl.DefValue != want {
			t.Errorf("--%s: %v, want default %s", name, fl, want)
		}
	}
	for _, o := range []evalOptions{
		{Context: true, Window: 255, Budget: 100, ContextBatch: 1},
		{Context: true, Window: 600, Budget: 0, ContextBatch: 1},
		{Context: true, Window: 600, Budget: 100, ContextBatch: 0},
	} {
		if err := o.checkContext(); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if err := (&evalOptions{Window: 1}).checkContext(); err != nil {
		t.Errorf("context off: %v", err)
	}
}
