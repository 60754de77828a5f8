package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The fixture in testdata/eval is synthetic: 2 conversations (one whose id
// needs sanitising), 20 turns, 6 questions of which one is adversarial.
var (
	evalTurns     = filepath.Join("testdata", "eval", "turns.jsonl")
	evalQuestions = filepath.Join("testdata", "eval", "questions.jsonl")
	evalKs        = []int{1, 3, 5}
)

func TestEvalInProcess(t *testing.T) {
	t.Parallel()
	questions, err := filepath.Abs(evalQuestions)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.jsonl")
	rep, err := runEval(context.Background(), evalOptions{Turns: evalTurns, Questions: questions, Out: out,
		Ks: evalKs, Mode: "hybrid", SkipAdversarial: true})
	if err != nil {
		t.Fatalf("eval: %v", err)
	}
	if rep.Turns != 20 || rep.Conversations != 2 || len(rep.Latencies) != 5 {
		t.Errorf("turns %d, conversations %d, queries %d; want 20, 2, 5", rep.Turns, rep.Conversations, len(rep.Latencies))
	}

	results := checkResultsFile(t, out, []int{0, 1, 2, 3, 4})

	// The dog's name is said in one turn, in the question's words.
	if top := results[0][:min(5, len(results[0]))]; !slices.Contains(top, "D1:3") {
		t.Errorf("qid 0: evidence D1:3 not in the top 5 %v", top)
	}

	var text bytes.Buffer
	if err := rep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	compareWithScorePy(t, rep, questions, out, false, text.String())
}

// Against a running server, twice: the second run replaces the sessions
// instead of storing every turn again, and adversarial questions can be kept.
func TestEvalServerRerun(t *testing.T) {
	t.Parallel()
	ts := startServer(t, t.TempDir())
	questions, err := filepath.Abs(evalQuestions)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "results.jsonl")
	var rep *evalReport
	for range 2 {
		rep, err = runEval(context.Background(), evalOptions{Turns: evalTurns, Questions: questions, Out: out,
			Ks: evalKs, Server: ts.URL + "/", Mode: "text", SkipAdversarial: false})
		if err != nil {
			t.Fatalf("eval: %v", err)
		}
	}
	for session, want := range map[string]float64{"eval-syn-1": 11, "eval-syn_2": 9} {
		st := ts.sessionStatus(t, session)
		if got := st["messages"].(map[string]any)["active"]; got != want {
			t.Errorf("%s holds %v active messages after two runs, want %v", session, got, want)
		}
	}
	checkResultsFile(t, out, []int{0, 1, 2, 3, 4, 5})
	var js bytes.Buffer
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(js.Bytes()) {
		t.Fatalf("--json output is not JSON: %s", js.Bytes())
	}
	compareWithScorePy(t, rep, questions, out, true, "")
}

// checkResultsFile checks the format score.py reads: one line per asked
// question in question order, exactly {"qid": int, "retrieved": [turn ids]},
// each id a turn of that question's conversation, at most max k, no repeats.
func checkResultsFile(t *testing.T, path string, wantQIDs []int) map[int][]string {
	t.Helper()
	convOf := map[int]string{}
	if err := readJSONL(evalQuestions, func(_ int, dec *json.Decoder) error {
		var q struct {
			QID    int    `json:"qid"`
			ConvID string `json:"conv_id"`
		}
		err := dec.Decode(&q)
		convOf[q.QID] = q.ConvID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	convs, err := loadTurns(evalTurns)
	if err != nil {
		t.Fatal(err)
	}
	turnsOf := map[string]map[string]bool{}
	for _, c := range convs {
		turnsOf[c.ID] = c.turnIDs
	}

	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got := map[int][]string{}
	var order []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &fields); err != nil {
			t.Fatalf("results line %q: %v", sc.Text(), err)
		}
		if len(fields) != 2 || fields["qid"] == nil || fields["retrieved"] == nil {
			t.Fatalf("results line %q: want exactly qid and retrieved", sc.Text())
		}
		var qid int
		var ids []string
		if err := json.Unmarshal(fields["qid"], &qid); err != nil {
			t.Fatalf("results line %q: qid: %v", sc.Text(), err)
		}
		if err := json.Unmarshal(fields["retrieved"], &ids); err != nil || ids == nil {
			t.Fatalf("results line %q: retrieved is not a list of strings: %v", sc.Text(), err)
		}
		if len(ids) > slices.Max(evalKs) {
			t.Errorf("qid %d: %d ids, more than k=%d", qid, len(ids), slices.Max(evalKs))
		}
		seen := map[string]bool{}
		for _, id := range ids {
			if seen[id] {
				t.Errorf("qid %d: %s retrieved twice", qid, id)
			}
			seen[id] = true
			if !turnsOf[convOf[qid]][id] {
				t.Errorf("qid %d: %s is not a turn of %s", qid, id, convOf[qid])
			}
		}
		got[qid] = ids
		order = append(order, qid)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order, wantQIDs) {
		t.Fatalf("results for qids %v, want %v", order, wantQIDs)
	}
	return got
}

// compareWithScorePy runs the benchmark's own scorer on the results file and
// wants our numbers to be its numbers: the printed tables byte for byte (when
// text is given) and the --json table value for value.
func compareWithScorePy(t *testing.T, rep *evalReport, questions, results string, includeAdversarial bool, text string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found: cannot compare with score.py")
	}
	scorePy := filepath.Join(repoRoot(t), "..", "shared", "bench", "score.py")
	if _, err := os.Stat(scorePy); err != nil {
		t.Skipf("score.py not found: %v", err)
	}
	jsonPath := filepath.Join(t.TempDir(), "score.json")
	args := []string{scorePy, "--questions", questions, "--results", results, "--k", "1,3,5", "--json", jsonPath}
	if includeAdversarial {
		args = append(args, "--include-adversarial")
	}
	pyOut, err := exec.Command(python, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("score.py: %v\n%s", err, pyOut)
	}

	if text != "" && !strings.HasPrefix(text, string(pyOut)) {
		t.Errorf("our tables differ from score.py's\n--- ours:\n%s\n--- score.py:\n%s", text, pyOut)
	}
	var ours bytes.Buffer
	rep.Scores.writeTables(&ours, questions, results)
	if ours.String() != string(pyOut) {
		t.Errorf("our tables differ from score.py's\n--- ours:\n%s\n--- score.py:\n%s", ours.String(), pyOut)
	}

	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var py struct {
		Table map[string]map[string]float64 `json:"table"`
	}
	if err := json.Unmarshal(raw, &py); err != nil {
		t.Fatalf("score.py --json: %v", err)
	}
	b, err := json.Marshal(rep.Scores.table())
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]float64
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, py.Table) {
		t.Errorf("table = %v\nscore.py: %v", got, py.Table)
	}
	// The fixture's multi-hop question has three evidence turns, so a
	// partial recall (a third, two thirds) is exercised unless all are found.
	wantN := map[string]float64{"single-hop": 2, "multi-hop": 1, "temporal": 1, "open-domain": 1, "OVERALL": 5}
	if includeAdversarial {
		wantN["adversarial"], wantN["OVERALL"] = 1, 6
	}
	for c, n := range wantN {
		if got[c]["n"] != n {
			t.Errorf("%s: n = %v, want %v", c, got[c]["n"], n)
		}
	}
}

// repoRoot is the directory of go.mod above the test's working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

func TestEvalCreatedAt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ts, human, want string
		bad             bool
	}{
		{ts: "2023-05-08T13:56:00", want: "2023-05-08T13:56:00Z"}, // LoCoMo: no zone, taken as UTC
		{ts: "2023-05-08T13:56:00+02:00", want: "2023-05-08T13:56:00+02:00"},
		{ts: "2023-05-08 13:56", want: "2023-05-08T13:56:00Z"},
		{ts: "2023-05-08", want: "2023-05-08T00:00:00Z"},
		{human: "1:56 pm on 8 May, 2023", want: "2023-05-08T13:56:00Z"},
		{want: ""},
		{ts: "8 May", bad: true},
		{human: "yesterday", bad: true},
	} {
		got, err := evalCreatedAt(evalTurn{SessionTS: tc.ts, SessionDateTime: tc.human, TurnID: "D1:1"})
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("session_ts %q, session_date_time %q: %q, %v; want %q, error %v", tc.ts, tc.human, got, err, tc.want, tc.bad)
		}
	}
}

func TestEvalSessionID(t *testing.T) {
	t.Parallel()
	for conv, want := range map[string]string{
		"conv-26":                "eval-conv-26",
		"syn/2":                  "eval-syn_2",
		"a b:c.d":                "eval-a_b:c.d",
		"é":                      "eval-_",
		"":                       "eval-",
		strings.Repeat("x", 200): "eval-" + strings.Repeat("x", 123),
	} {
		if got := evalSessionID(conv); got != want {
			t.Errorf("evalSessionID(%q) = %q, want %q", conv, got, want)
		}
	}
}

// score.py reads category and adversarial with Python's str() and
// truthiness; so do we.
func TestEvalQuestionCategory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		line        string
		cat         string
		adversarial bool
	}{
		{`{"category": 2, "category_name": "temporal"}`, "temporal", false},
		{`{"category": 5}`, "5", true},
		{`{"category": "single-session-user", "adversarial": false}`, "single-session-user", false},
		{`{"category_name": "knowledge-update", "adversarial": 1}`, "knowledge-update", true},
		{`{}`, "None", false},
	} {
		var q evalQuestion
		dec := json.NewDecoder(strings.NewReader(tc.line))
		dec.UseNumber()
		if err := dec.Decode(&q); err != nil {
			t.Fatal(err)
		}
		if q.categoryKey() != tc.cat || q.adversarial() != tc.adversarial {
			t.Errorf("%s: category %q, adversarial %v; want %q, %v", tc.line, q.categoryKey(), q.adversarial(), tc.cat, tc.adversarial)
		}
	}
}
