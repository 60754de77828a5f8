package scoring

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestLoCoMoReferences reports how well the references component alone
// separates LoCoMo's evidence turns (those a question needs) from the rest:
// the AUC, i.e. the chance that a random evidence turn outscores a random
// other turn (0.5 is chance). It runs only when CTXD_LOCOMO names the
// directory holding turns.jsonl and questions.jsonl (README, "Evaluation
// and benchmarks", says where LoCoMo comes from):
//
//	CTXD_LOCOMO=$BENCH_DIR go test -run LoCoMo -v ./scoring/
//
// LoCoMo is chit-chat, so this measures the rare-word side only; it is a
// sanity check, not the tuning benchmark.
func TestLoCoMoReferences(t *testing.T) {
	dir := os.Getenv("CTXD_LOCOMO")
	if dir == "" {
		t.Skip("CTXD_LOCOMO not set")
	}
	type turn struct {
		ConvID string `json:"conv_id"`
		TurnID string `json:"turn_id"`
		Text   string `json:"text"`
	}
	type question struct {
		ConvID      string   `json:"conv_id"`
		Evidence    []string `json:"evidence"`
		Adversarial bool     `json:"adversarial"`
	}
	evidence := map[string]bool{}
	for _, q := range readLines[question](t, filepath.Join(dir, "questions.jsonl")) {
		for _, e := range q.Evidence {
			evidence[e+"@"+q.ConvID] = !q.Adversarial || evidence[e+"@"+q.ConvID]
		}
	}
	convs := map[string][]Doc{}
	var order []string
	for _, tr := range readLines[turn](t, filepath.Join(dir, "turns.jsonl")) {
		if convs[tr.ConvID] == nil {
			order = append(order, tr.ConvID)
		}
		d := Doc{ID: tr.TurnID + "@" + tr.ConvID, Text: tr.Text, Turn: len(convs[tr.ConvID])}
		convs[tr.ConvID] = append(convs[tr.ConvID], d)
	}
	for _, conv := range order {
		docs := convs[conv]
		cands := make([]Candidate, len(docs))
		for i, d := range docs {
			cands[i] = Candidate{ID: d.ID, Text: d.Text, Turn: d.Turn}
		}
		refs := references(cands, docs, shardsFor(docs))
		var ev, other []float64
		for i, r := range refs {
			if evidence[cands[i].ID] {
				ev = append(ev, r.score)
			} else {
				other = append(other, r.score)
			}
		}
		var wins float64
		for _, a := range ev {
			for _, b := range other {
				switch {
				case a > b:
					wins++
				case a == b:
					wins += 0.5
				}
			}
		}
		t.Logf("%s: %d turns, %d evidence: references AUC %.3f, mean %.3f evidence vs %.3f other",
			conv, len(docs), len(ev), wins/float64(len(ev)*len(other)), mean(ev), mean(other))
	}
}

func mean(x []float64) float64 {
	var s float64
	for _, v := range x {
		s += v
	}
	return s / float64(max(len(x), 1))
}

func readLines[T any](t *testing.T, path string) []T {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var v T
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
