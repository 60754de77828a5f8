package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The sample is what a clone without the evaluation data runs `make eval`
// and `make eval-agent` on: it must be the same for a seed, in the shapes
// the evals read, with evidence that points at the turns saying the answer,
// and both evals must run on it in this process and measure something.
func TestSampleEval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if r := runCLI(t, nil, "sample", "--out", dir); r.Code != exitOK {
		t.Fatalf("sample: exit %d\n%s", r.Code, r.Err)
	}
	again := t.TempDir()
	if r := runCLI(t, nil, "sample", "--out", again); r.Code != exitOK {
		t.Fatalf("sample: exit %d\n%s", r.Code, r.Err)
	}
	for _, f := range []string{"locomo/turns.jsonl", "locomo/questions.jsonl", "agent/runs.jsonl"} {
		a, errA := os.ReadFile(filepath.Join(dir, f))
		b, errB := os.ReadFile(filepath.Join(again, f))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: not the same for the same seed (%v, %v)", f, errA, errB)
		}
	}
	checkSampleEvidence(t, filepath.Join(dir, "locomo", "turns.jsonl"), filepath.Join(dir, "locomo", "questions.jsonl"), 224, 36)

	// The evals run on a smaller sample of the same kind: the default one
	// takes 110 s of both evals under the race detector on a busy machine.
	small := t.TempDir()
	if r := runCLI(t, nil, "sample", "--out", small, "--conversations", "1", "--sessions", "3", "--turns", "8",
		"--runs", "1", "--steps", "14"); r.Code != exitOK {
		t.Fatalf("sample: exit %d\n%s", r.Code, r.Err)
	}
	turns, questions := filepath.Join(small, "locomo", "turns.jsonl"), filepath.Join(small, "locomo", "questions.jsonl")
	checkSampleEvidence(t, turns, questions, 24, 8)
	r := runCLI(t, nil, "eval", "--turns", turns, "--questions", questions,
		"--out", filepath.Join(t.TempDir(), "results.jsonl"), "--json")
	if r.Code != exitOK {
		t.Fatalf("eval: exit %d\n%s", r.Code, r.Err)
	}
	var rep struct {
		Table   map[string]map[string]float64 `json:"table"`
		Ingest  struct{ Turns int }           `json:"ingest"`
		Context struct {
			Table map[string]map[string]float64 `json:"table"`
		} `json:"context"`
	}
	if err := json.Unmarshal([]byte(r.Out), &rep); err != nil {
		t.Fatalf("eval --json: %v\n%s", err, r.Out)
	}
	// Single-hop questions name the fact's words: search finds them.
	if rep.Ingest.Turns != 24 || rep.Table["single-hop"]["n"] != 3 || rep.Table["single-hop"]["recall@10"] < 90 {
		t.Errorf("eval on the sample: turns %d, single-hop %v", rep.Ingest.Turns, rep.Table["single-hop"])
	}
	if o := rep.Context.Table["OVERALL"]; o["n"] != 7 || o["ctxd"] <= 0 {
		t.Errorf("evidence in window on the sample: %v", o)
	}

	r = runCLI(t, nil, "eval", "--agent", filepath.Join(small, "agent", "runs.jsonl"), "--ctxd", "", "--json")
	if r.Code != exitOK {
		t.Fatalf("eval --agent: exit %d\n%s", r.Code, r.Err)
	}
	fig := decodeJSON(t, r.Out)
	// The runs outgrow the window (compactions) and later turns use names
	// from far back (needed tokens), which is what the replay measures.
	if fig["runs"] != 1.0 || fig["needed_tokens"].(float64) < 1 || fig["compactions_per_100_messages"].(float64) <= 0 ||
		fig["invalid_pairs"] != 0.0 || fig["over_budget_windows"] != 0.0 {
		t.Errorf("eval --agent on the sample: %v", fig)
	}

	if r := runCLI(t, nil, "sample"); r.Code != exitUsage {
		t.Errorf("sample without --out: exit %d, want %d", r.Code, exitUsage)
	}
}

// checkSampleEvidence checks the counts of turns and questions, that every
// question's evidence is a turn of its conversation, and that a single-hop
// answer is said in its turn.
func checkSampleEvidence(t *testing.T, turnsPath, questionsPath string, wantTurns, wantQuestions int) {
	t.Helper()
	text := map[string]string{} // conv_id/turn_id -> text
	readJSONLines(t, turnsPath, func(line map[string]any) {
		text[line["conv_id"].(string)+"/"+line["turn_id"].(string)] = line["text"].(string)
	})
	n := 0
	readJSONLines(t, questionsPath, func(q map[string]any) {
		n++
		for _, e := range q["evidence"].([]any) {
			said, ok := text[q["conv_id"].(string)+"/"+e.(string)]
			if !ok {
				t.Errorf("question %v: evidence %v is no turn", q["qid"], e)
			}
			if q["category_name"] == "single-hop" && !strings.Contains(said, q["answer"].(string)) {
				t.Errorf("question %v: answer %q not in its evidence %q", q["qid"], q["answer"], said)
			}
		}
	})
	if len(text) != wantTurns || n != wantQuestions {
		t.Errorf("%d turns, %d questions; want %d, %d", len(text), n, wantTurns, wantQuestions)
	}
}

func readJSONLines(t *testing.T, path string, each func(map[string]any)) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		each(line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}
