package index

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/index/glove"
	"github.com/ctxd/ctxd/memory"
)

// TestLoCoMo measures text-side recall on the LoCoMo dev set (turn level,
// adversarial questions skipped, as bench/score.py does). It runs only when
// CTXD_LOCOMO names the directory holding turns.jsonl and questions.jsonl (README, "Evaluation
// and benchmarks", says where LoCoMo comes from):
//
//	CTXD_LOCOMO=$BENCH_DIR go test -run LoCoMo -v ./index/
//
// Figures: see the comment on DefaultNameBoost.
func TestLoCoMo(t *testing.T) {
	dir := os.Getenv("CTXD_LOCOMO")
	if dir == "" {
		t.Skip("CTXD_LOCOMO not set")
	}
	turns := readJSONL[locomoTurn](t, filepath.Join(dir, "turns.jsonl"))
	questions := readJSONL[locomoQuestion](t, filepath.Join(dir, "questions.jsonl"))

	variants := []struct {
		name string
		opts Options
	}{
		{"text only", Options{NameBoost: -1, WhenBoost: -1}},
		{"text+name", Options{WhenBoost: -1}},
		{"text+when", Options{NameBoost: -1}},
		{"defaults", Options{}},
		{"name 0.5 when 0.5", Options{NameBoost: 0.5, WhenBoost: 0.5}},
		{"name 1.5 when 1", Options{NameBoost: 1.5, WhenBoost: 1}},
	}
	for _, v := range variants {
		x := openTest(t, v.opts)
		loadLoCoMo(t, x, turns, nil)
		t.Logf("%-20s R@10:%s", v.name, evalLoCoMo(t, x, questions, memory.ModeText, nil))
	}
}

// TestLoCoMoHybrid measures hybrid recall with the embedded GloVe model
// (index/glove), to choose the fusion and the vector weight. Same switch as
// TestLoCoMo. Figures: see the comment on DefaultVectorWeight.
func TestLoCoMoHybrid(t *testing.T) {
	dir := os.Getenv("CTXD_LOCOMO")
	if dir == "" {
		t.Skip("CTXD_LOCOMO not set")
	}
	turns := readJSONL[locomoTurn](t, filepath.Join(dir, "turns.jsonl"))
	questions := readJSONL[locomoQuestion](t, filepath.Join(dir, "questions.jsonl"))
	model, err := glove.Default()
	if err != nil {
		t.Fatal(err)
	}
	texts := make([]string, len(turns))
	for i, tr := range turns {
		texts[i] = tr.Speaker + ": " + tr.Text
	}
	vecs, err := model.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	qtexts := make([]string, len(questions))
	for i, q := range questions {
		qtexts[i] = q.Question
	}
	qvecs, err := model.Embed(context.Background(), qtexts)
	if err != nil {
		t.Fatal(err)
	}
	variants := []struct {
		name string
		mode string
		opts Options
	}{
		{"text", memory.ModeText, Options{}},
		{"vector", memory.ModeVector, Options{}},
		{"minmax w=0.2", memory.ModeHybrid, Options{VectorWeight: 0.2}},
		{"minmax w=0.3", memory.ModeHybrid, Options{VectorWeight: 0.3}},
		{"minmax w=0.4", memory.ModeHybrid, Options{VectorWeight: 0.4}},
		{"minmax w=0.5", memory.ModeHybrid, Options{VectorWeight: 0.5}},
		{"w=0.3 c=1000", memory.ModeHybrid, Options{VectorWeight: 0.3, MinCandidates: 1000}},
		{"rrf k=10", memory.ModeHybrid, Options{Fusion: FusionRRF, RRFK: 10}},
		{"rrf k=60", memory.ModeHybrid, Options{Fusion: FusionRRF, RRFK: 60}},
	}
	// Expansion (see Options.Expander): GloVe neighbours at cosine >= 0.6
	// (0.5 measured the same, 0.7 lower).
	expander := func(word string) []string {
		var out []string
		for _, nb := range model.Neighbours(word, expansionsPerWord, 0.6) {
			out = append(out, nb.Word)
		}
		return out
	}
	for _, w := range []float64{0.3, 0.5} {
		variants = append(variants, struct {
			name string
			mode string
			opts Options
		}{fmt.Sprintf("expansion %.1f", w), memory.ModeHybrid, Options{Expander: expander, ExpansionWeight: w}})
	}
	for _, v := range variants {
		x := openTest(t, v.opts)
		loadLoCoMo(t, x, turns, vecs)
		t.Logf("%-14s R@10:%s", v.name, evalLoCoMo(t, x, questions, v.mode, qvecs))
	}
	// What leaving common terms out of the text clause costs (LoCoMo's
	// ~1,300 turns are below commonTermMinDocs, so it is forced here).
	old := commonTermMinDocs
	commonTermMinDocs = 0
	defer func() { commonTermMinDocs = old }()
	{
		x := openTest(t, Options{})
		loadLoCoMo(t, x, turns, vecs)
		t.Logf("pruned %.2f    R@10:%s", commonTermShare, evalLoCoMo(t, x, questions, memory.ModeHybrid, qvecs))
	}
}

func loadLoCoMo(t *testing.T, x *Index, turns []locomoTurn, vecs [][]float32) {
	t.Helper()
	var msgs []*memory.Message
	for i, tr := range turns {
		ts, err := time.Parse("2006-01-02T15:04:05", tr.SessionTS)
		if err != nil {
			t.Fatal(err)
		}
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		m := &memory.Message{
			ID: tr.TurnID + "@" + tr.ConvID, Tenant: "bench", SessionID: tr.ConvID, Role: role,
			Name: tr.Speaker, Content: tr.Text, CreatedAt: ts, State: memory.StateActive,
		}
		if vecs != nil {
			m.Vector = vecs[i]
		}
		msgs = append(msgs, m)
	}
	mustApply(t, x, memory.IndexBatch{Upserts: msgs, Watermark: 1})
}

// evalLoCoMo returns recall@10 per category, as bench/score.py counts it.
func evalLoCoMo(t *testing.T, x *Index, questions []locomoQuestion, mode string, qvecs [][]float32) string {
	t.Helper()
	recall := map[string][]float64{}
	for i, q := range questions {
		if q.Adversarial || len(q.Evidence) == 0 {
			continue
		}
		sq := memory.SearchQuery{Tenant: "bench", Sessions: []string{q.ConvID}, Text: q.Question, K: 10, Mode: mode, Expand: true}
		if qvecs != nil {
			sq.Vector = qvecs[i]
		}
		hits := mustSearch(t, x, sq)
		found := 0
		for _, e := range q.Evidence {
			if slices.ContainsFunc(hits, func(h memory.Hit) bool { return strings.HasPrefix(h.ID, e+"@") }) {
				found++
			}
		}
		r := float64(found) / float64(len(q.Evidence))
		recall[q.Category] = append(recall[q.Category], r)
		recall["overall"] = append(recall["overall"], r)
	}
	var b strings.Builder
	for _, c := range []string{"single-hop", "multi-hop", "temporal", "open-domain", "overall"} {
		fmt.Fprintf(&b, " %s %.1f", c, 100*mean(recall[c]))
	}
	return b.String()
}

type locomoTurn struct {
	ConvID    string `json:"conv_id"`
	SessionTS string `json:"session_ts"`
	TurnID    string `json:"turn_id"`
	Speaker   string `json:"speaker"`
	Text      string `json:"text"`
}

type locomoQuestion struct {
	ConvID      string   `json:"conv_id"`
	Question    string   `json:"question"`
	Category    string   `json:"category_name"`
	Adversarial bool     `json:"adversarial"`
	Evidence    []string `json:"evidence"`
}

func readJSONL[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
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

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
