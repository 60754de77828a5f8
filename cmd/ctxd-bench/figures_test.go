package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// testdata/figures holds the JSON reports of a --quick run (the eval's
// per-question detail removed, the header fixed), a floor table, and the
// agent replay of 2 runs (with 2 writes over the hard limit put in).
var figuresFixture = filepath.Join("testdata", "figures")

func loadFiguresFixture(t *testing.T) *figuresData {
	t.Helper()
	docs, err := loadFiguresDocs(figuresFixture)
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseFiguresDocs(docs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// figRowOf is the row whose "what" starts with prefix; the test fails
// unless there is exactly one.
func figRowOf(t *testing.T, rows []figRow, prefix string) figRow {
	t.Helper()
	var found []figRow
	for _, r := range rows {
		if strings.HasPrefix(r.What, prefix) {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d rows start with %q: %+v", len(found), prefix, found)
	}
	return found[0]
}

func TestFiguresRenderFixture(t *testing.T) {
	t.Parallel()
	d := loadFiguresFixture(t)
	rows := figuresRows(d)
	want := []struct{ prefix, figure, goal, status string }{
		{"recall@5/10/20, single-hop (n=9)", "44.4 / 44.4 / 77.8 (BM25 floor 51.3 / 58.3 / 65.8)", "above the BM25 floor", "not yet: @5, @10"},
		{"recall@5/10/20, multi-hop (n=3)", "33.3 / 66.7 / 66.7 (BM25 floor 13.5 / 19.5 / 29.2)", "above the BM25 floor", "met"},
		{"recall@5/10/20, open-domain (n=1)", "0.0 / 50.0 / 100.0 (BM25 floor 13.6 / 31.8 / 36.4)", "above the BM25 floor", "not yet: @5"},
		{"recall@5/10/20, overall (n=20)", "55.0 / 67.5 / 85.0 (BM25 floor 50.6 / 57.3 / 63.9)", "above the BM25 floor", "met"},
		{"evidence in window, single-hop (n=9): 4,096-token window, 2,048-token budget", "100.0 (sliding window 100.0, BM25 packing 88.9)", "ahead of BM25 packing", "met"},
		{"evidence in window, temporal (n=7)", "100.0 (sliding window 71.4, BM25 packing 100.0)", "ahead of BM25 packing", "not yet"},
		{"evidence in window, overall (n=20)", "100.0 (sliding window 80.0, BM25 packing 95.0)", "ahead of BM25 packing", "met"},
		{"context, LoCoMo sessions", "p50 141.0 ms, p99 274.4 ms (20 calls)", "", ""},
		{"ingest, 400 chat messages of 40-80 words, batches of 100, 4 clients", "561 msg/s", ">= 2,000 msg/s", "not yet"},
		{"ingest of the bench data set, 1,000 messages / 10 sessions (10% tool outputs)", "252 msg/s (0.21 MB/s of requests)", "", ""},
		{"hybrid search across sessions, k=10, 1 client, 1,000 messages / 10 sessions", "p50 1.7 ms, p99 90.7 ms (76 calls)", "p99 <= 25 ms", "not yet"},
		{"hybrid search in one session", "p50 1.4 ms, p99 47.9 ms (69 calls)", "", ""},
		{"context (max_tokens 4,000), 1 client", "p50 8.9 ms, p99 66.0 ms (83 calls)", "p99 <= 30 ms", "not yet"},
		{"8 clients for 2.1 s of mixed load", "63.6 ops/s, 0 errors; p99 ms: search_all 211.6, search_session 211.5, context 380.6, write 417.4", "no errors", "met"},
		{"start-up on the bench data set: a fresh `ctxd serve`", "1.05 s (0.59 s of CPU)", "<= 3 s", "met"},
		{"RSS on the bench data set", "101 MB when a fresh process is ready (63 anon, 38 file-mapped); in-process after the mixed load 148 MB, peak 161 MB (with the load generator)", "", ""},
		{"agent replay, needed-in-window (names the next turn uses from more than 6 messages back, shown in context): 2 recorded coding-agent runs, 16,000-token window, 12,000-token budget",
			"75.4 (baseline 82.6: system prompt, task and the newest messages that fit; 69 names)",
			">= 95, and >= 10 points above the baseline", "not yet: below 95, less than 10 points above the baseline"},
		{"agent replay, latest input", "100 / 98.9 (91 calls)", "100 present", "met"},
		{"agent replay, windows over budget", "0 / 0 / 2 (of 91 windows, 93 writes)", "0 / 0 / 0", "not yet: over 85%"},
		{"agent replay, compactions per 100", "24.2", "<= 5", "not yet"},
		{"agent replay, live summaries", "0.473", "<= 0.05", "not yet"},
		{"agent replay, data dir bytes", "97.68", "<= 4", "not yet"},
		{"agent replay, context latency, 1 client", "p50 21.1 ms, p99 236.1 ms (91 calls)", "", ""},
		{"agent replay, context latency growth", "16.24x", "<= 1.5x", "not yet"},
		{"gateway replay (the whole history on every call, go-openai), needed-in-window in what the model was sent: 2 runs, 16,000-token model window, 4,000 tokens kept for the answer",
			"100.0 (context endpoint 75.4, baseline 82.6)", "at least the context endpoint's", "met"},
		{"gateway replay (the whole history on every call, go-openai), requests over the model's window",
			"0 / 0 / 0 / 100% (of 91 model calls; 5 flush turns)", "0 / 0 / 0 / 100%", "met"},
		{"gateway replay (the whole history on every call, go-openai), the gateway's added time", "p50 27.3 ms, p99 97.1 ms (91 calls)", "", ""},
	}
	for _, w := range want {
		r := figRowOf(t, rows, w.prefix)
		if r.Figure != w.figure || r.Goal != w.goal || r.Status != w.status {
			t.Errorf("%s:\n got  %q | %q | %q\n want %q | %q | %q", w.prefix, r.Figure, r.Goal, r.Status, w.figure, w.goal, w.status)
		}
	}
	// 5 recall, 5 evidence, LoCoMo context, 8 agent replay, 3 gateway replay, 2 ingest, 3 latency, load,
	// start-up, RSS.
	if len(rows) != 30 {
		t.Errorf("%d rows, want 30", len(rows))
	}

	block := renderFigures(d)
	for _, s := range []string{
		"Measured 2026-11-22 01:40 UTC at commit `abc1234` on linux/amd64, 2 CPUs (Test CPU 3000), go1.26.8;",
		"command: `ctxd figures --quick --save-json=testdata/figures`",
		"**--quick: smoke-run sizes, not figures to publish.**",
		"| what | figure | goal | status |\n|---|---|---|---|\n| recall@5/10/20, single-hop (n=9)",
	} {
		if !strings.Contains(block, s) {
			t.Errorf("block lacks %q:\n%s", s, block)
		}
	}
	if n := strings.Count(block, "\n| "); n != 30+1 {
		t.Errorf("%d table lines after the header, want 31:\n%s", n, block)
	}
}

// Each goal's status flips where the number, as shown, crosses the goal.
func TestFiguresStatusFlips(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, prefix string
		set          func(d *figuresData)
		status       string
	}{
		{"ingest at goal", "ingest, 400", func(d *figuresData) { d.Ingest.Ingest.MessagesPerSec = 1999.5 }, "met"},
		{"ingest below goal", "ingest, 400", func(d *figuresData) { d.Ingest.Ingest.MessagesPerSec = 1999.4 }, "not yet"},
		{"search p99 at goal", "hybrid search across", func(d *figuresData) { setP99(d.Latency, benchOpSearchAll, 25.04) }, "met"},
		{"search p99 over goal", "hybrid search across", func(d *figuresData) { setP99(d.Latency, benchOpSearchAll, 25.1) }, "not yet"},
		{"context p99 at goal", "context (max_tokens", func(d *figuresData) { setP99(d.Latency, benchOpContext, 30.04) }, "met"},
		{"context p99 over goal", "context (max_tokens", func(d *figuresData) { setP99(d.Latency, benchOpContext, 30.1) }, "not yet"},
		{"startup at goal", "start-up", func(d *figuresData) { d.Bench.Startup.FreshSeconds = 3.0 }, "met"},
		{"startup over goal", "start-up", func(d *figuresData) { d.Bench.Startup.FreshSeconds = 3.01 }, "not yet"},
		{"in-process startup over goal", "start-up", func(d *figuresData) {
			d.Bench.Startup.FreshSeconds, d.Bench.Startup.InProcessSeconds = 0, 3.2
		}, "not yet"},
		{"load with an error", "8 clients", func(d *figuresData) { d.Load.Errors = 1 }, "not yet"},
		{"evidence ahead by 0.1", "evidence in window, temporal", func(d *figuresData) {
			d.Eval.Context.Table["temporal"]["ctxd"] = 100.1
		}, "met"},
		{"evidence level after rounding", "evidence in window, single-hop", func(d *figuresData) {
			d.Eval.Context.Table["single-hop"]["ctxd"] = 88.94
		}, "not yet"},
		{"recall above the floor everywhere", "recall@5/10/20, single-hop", func(d *figuresData) {
			row := d.Eval.Table["single-hop"]
			row["recall@5"], row["recall@10"] = 51.4, 58.4
		}, "met"},
		{"recall level with the floor", "recall@5/10/20, single-hop", func(d *figuresData) {
			row := d.Eval.Table["single-hop"]
			row["recall@5"], row["recall@10"], row["recall@20"] = 51.4, 58.3, 65.84
		}, "not yet: @10, @20"},
		{"agent needed at goal", "agent replay, needed-in-window", func(d *figuresData) {
			d.Agent.Needed, d.Agent.Baseline = 95, 85
		}, "met"},
		{"agent needed lead short", "agent replay, needed-in-window", func(d *figuresData) {
			d.Agent.Needed, d.Agent.Baseline = 97.5, 87.6
		}, "not yet: less than 10 points above the baseline"},
		{"agent needed below 95", "agent replay, needed-in-window", func(d *figuresData) {
			d.Agent.Needed, d.Agent.Baseline = 94.9, 50
		}, "not yet: below 95"},
		{"agent latest missing once", "agent replay, latest input", func(d *figuresData) { d.Agent.LatestPresent = 99.99 }, "not yet"},
		{"agent no bad windows or writes", "agent replay, windows over budget", func(d *figuresData) { d.Agent.OverHardLimit = 0 }, "met"},
		{"agent invalid pairs", "agent replay, windows over budget", func(d *figuresData) {
			d.Agent.OverHardLimit, d.Agent.Invalid, d.Agent.OverBudget = 0, 1, 3
		}, "not yet: over budget, invalid pairs"},
		{"agent compactions at goal", "agent replay, compactions", func(d *figuresData) { d.Agent.Compactions = 5.0 }, "met"},
		{"agent compactions over goal", "agent replay, compactions", func(d *figuresData) { d.Agent.Compactions = 5.1 }, "not yet"},
		{"agent summaries at goal", "agent replay, live summaries", func(d *figuresData) { d.Agent.Summaries = 0.05 }, "met"},
		{"agent summaries over goal", "agent replay, live summaries", func(d *figuresData) { d.Agent.Summaries = 0.051 }, "not yet"},
		{"agent storage at goal", "agent replay, data dir", func(d *figuresData) { v := 4.0; d.Agent.Storage = &v }, "met"},
		{"agent storage not measured", "agent replay, data dir", func(d *figuresData) { d.Agent.Storage = nil }, ""},
		{"agent growth at goal", "agent replay, context latency growth", func(d *figuresData) { v := 1.5; d.Agent.Growth = &v }, "met"},
		{"agent growth over goal", "agent replay, context latency growth", func(d *figuresData) { v := 1.51; d.Agent.Growth = &v }, "not yet"},
		{"gateway level with the context endpoint", "gateway replay (the whole history on every call, go-openai), needed", func(d *figuresData) {
			d.Agent.Needed, d.Gateway.Needed = 99.3, 99.26
		}, "met"},
		{"gateway below the context endpoint", "gateway replay (the whole history on every call, go-openai), needed", func(d *figuresData) {
			d.Agent.Needed, d.Gateway.Needed = 99.3, 99.2
		}, "not yet: below the context endpoint"},
		{"gateway request over the window", "gateway replay (the whole history on every call, go-openai), requests over", func(d *figuresData) {
			d.Gateway.OverWindow = 1
		}, "not yet: over the window"},
		{"gateway latest missing", "gateway replay (the whole history on every call, go-openai), requests over", func(d *figuresData) {
			d.Gateway.LatestPresent = 99.9
		}, "not yet"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := loadFiguresFixture(t)
			c.set(d)
			if got := figRowOf(t, figuresRows(d), c.prefix).Status; got != c.status {
				t.Errorf("status %q, want %q", got, c.status)
			}
		})
	}
}

func setP99(r *benchReport, op string, v float64) {
	l := r.Mixed.Ops[op]
	l.P99 = v
	r.Mixed.Ops[op] = l
}

// A category the floor does not state has no goal rather than a made-up one.
func TestFiguresRecallWithoutFloor(t *testing.T) {
	t.Parallel()
	d := loadFiguresFixture(t)
	delete(d.Floor.Table, "multi-hop")
	r := figRowOf(t, figuresRows(d), "recall@5/10/20, multi-hop")
	if r.Goal != "" || r.Status != "" || !strings.Contains(r.Figure, "no BM25 floor") {
		t.Errorf("row without floor: %+v", r)
	}
}

func TestFiguresReadmeBlock(t *testing.T) {
	t.Parallel()
	head := "# Title\n\nprose before\n\n" + figuresStart
	tail := figuresEnd + "\n\nprose after, with a | pipe\n"
	doc := head + "\nthe old table\n" + tail
	got, err := replaceFiguresBlock(doc, "new block\n")
	if err != nil {
		t.Fatal(err)
	}
	if want := head + "\nnew block\n" + tail; got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	again, err := replaceFiguresBlock(got, "new block\n")
	if err != nil || again != got {
		t.Errorf("a second render changed the document (%v):\n%q", err, again)
	}

	for name, bad := range map[string]string{
		"no markers":   "# Title\n\n| a | table |\n",
		"no end":       "x\n" + figuresStart + "\ny\n",
		"two starts":   figuresStart + "\n" + figuresStart + "\n" + figuresEnd + "\n",
		"end is first": figuresEnd + "\n" + figuresStart + "\n",
	} {
		if _, err := replaceFiguresBlock(bad, "b"); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}

	// On disk: a README without markers is left as it was, with an error
	// that says what to add.
	path := filepath.Join(t.TempDir(), "README.md")
	orig := "# Title\n\nno markers here\n"
	if err := os.WriteFile(path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	err = writeFiguresBlock(path, "block")
	if err == nil || !strings.Contains(err.Error(), figuresStart) || !strings.Contains(err.Error(), path) {
		t.Errorf("README without markers: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != orig {
		t.Errorf("README changed: %q", b)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".figures-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

func TestFiguresFloor(t *testing.T) {
	t.Parallel()
	fl, err := readFloor(filepath.Join(figuresFixture, "floor.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cat  string
		k    int
		want float64
	}{{"OVERALL", 5, 50.6}, {"overall", 20, 63.9}, {"open-domain", 10, 31.8}, {"temporal", 1, 46.0}} {
		if v, ok := fl.recall(c.cat, c.k); !ok || v != c.want {
			t.Errorf("%s@%d: %v %v, want %v", c.cat, c.k, v, ok, c.want)
		}
	}
	if _, ok := fl.recall("adversarial", 5); ok {
		t.Error("a category the table lacks has a floor")
	}
	if len(fl.Table) != 5 {
		t.Errorf("%d categories, want 5 (the table under the floor heading only): %v", len(fl.Table), fl.Table)
	}
	noFloor := filepath.Join(t.TempDir(), "README.md")
	os.WriteFile(noFloor, []byte("# x\n\n## Files\n| category | R@5 |\n|---|---|\n| a | 1 |\n"), 0o644)
	if _, err := readFloor(noFloor); err == nil {
		t.Error("a file without a floor section gave a floor")
	}
}

func runFiguresCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errw bytes.Buffer
	root := newRootCmd()
	root.SetArgs(append([]string{"figures"}, args...))
	root.SetOut(&out)
	root.SetErr(&errw)
	err := root.ExecuteContext(context.Background())
	if err != nil {
		t.Logf("stderr:\n%s", errw.String())
	}
	return out.String(), err
}

func TestFiguresFromJSON(t *testing.T) {
	t.Parallel()
	printed, err := runFiguresCmd(t, "--from-json", figuresFixture, "--print")
	if err != nil {
		t.Fatal(err)
	}
	if want := renderFigures(loadFiguresFixture(t)); printed != want {
		t.Errorf("--print wrote\n%s\nwant\n%s", printed, want)
	}

	readme := filepath.Join(t.TempDir(), "README.md")
	head, tail := "# ctxd\n\n"+figuresStart+"\n", figuresEnd+"\n\nafter\n"
	os.WriteFile(readme, []byte(head+"run `make figures`\n"+tail), 0o644)
	if _, err := runFiguresCmd(t, "--from-json", figuresFixture, "--readme", readme); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(readme)
	if want := head + printed + tail; string(b) != want {
		t.Errorf("README:\n%s\nwant\n%s", b, want)
	}

	if _, err := runFiguresCmd(t, "--from-json", t.TempDir(), "--print"); err == nil || !strings.Contains(err.Error(), figDocMeta) {
		t.Errorf("an empty --from-json dir: %v", err)
	}
	if _, err := runFiguresCmd(t, "--from-json", figuresFixture, "--quick"); err == nil {
		t.Error("--from-json with --quick accepted")
	}
}

// One --quick run end to end: every measurement against in-process
// servers, into a README, and the saved reports render the same block.
func TestFiguresQuickEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the eval and the bench against in-process servers")
	}
	dir := t.TempDir()
	readme, saved := filepath.Join(dir, "README.md"), filepath.Join(dir, "json")
	head, tail := "# ctxd\n\nprose\n\n"+figuresStart+"\n", figuresEnd+"\n\nmore prose\n"
	if err := os.WriteFile(readme, []byte(head+"run `make figures`\n"+tail), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runFiguresCmd(t, "--quick", "--readme", readme, "--save-json", saved,
		"--turns", evalTurns, "--questions", evalQuestions, "--floor", filepath.Join(figuresFixture, "floor.md"),
		"--messages", "300", "--sessions", "3", "--ingest-messages", "200", "--clients", "4",
		"--duration", "1s", "--latency-duration", "1s", "--agent-runs", writeAgentRun(t, "quick"),
		"--ctxd", "") // serve in this process: a test has no bin/ctxd
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	if !strings.HasPrefix(doc, head) || !strings.HasSuffix(doc, tail) {
		t.Fatalf("the README outside the markers changed:\n%s", doc)
	}
	block := strings.TrimSuffix(strings.TrimPrefix(doc, head), tail)
	for _, s := range []string{"--quick: smoke-run sizes", "command: `ctxd-bench figures --agent-limit=1 --agent-runs=", " --clients=4 --ctxd='' --duration=1s",
		"| ingest of the bench data set, 300 messages / 3 sessions", "| ingest, 200 chat messages",
		"in-process restart to /readyz 200 (no fresh process: skipped: no --ctxd binary)",
		"| 4 clients for ", ", 0 errors;", "| recall@5/10/20, overall (n=", "| evidence in window, overall (n=",
		"| agent replay, needed-in-window (names the next turn uses from more than 6 messages back, shown in context): 1 recorded coding-agent runs, 16,000-token window, 12,000-token budget | ",
		"(baseline 100.0: system prompt, task and the newest messages that fit; compact-at-limit 100.0; 5 names)",
		"| agent replay, cached prefix", "| agent replay, cost per call", "| agent replay, prompted recall"} {
		if !strings.Contains(block, s) {
			t.Errorf("block lacks %q:\n%s", s, block)
		}
	}
	printed, err := runFiguresCmd(t, "--from-json", saved, "--print")
	if err != nil {
		t.Fatal(err)
	}
	if printed != block {
		t.Errorf("the saved reports render\n%s\nthe run wrote\n%s", printed, block)
	}
}

// The agent replay's cost figures and prompted recall (issue 23) render as
// rows of their own, with their goals, when the report carries them (the
// fixture, written before them, renders without).
func TestFiguresAgentCacheRows(t *testing.T) {
	d := loadFiguresFixture(t)
	fl := func(v float64) *float64 { return &v }
	in := func(v int) *int { return &v }
	a := &d.Agent
	a.NeededCompact, a.TokensPerCall, a.Cached, a.Cost = fl(54.4), in(7817), fl(90.9), in(1420)
	a.BaseCached, a.BaseCost, a.CompactTokens, a.CompactCached, a.CompactCost = fl(59.6), in(4625), in(7065), fl(91.9), in(1221)
	a.CostVs, a.Probes, a.PromptedRecall = fl(1.16), in(284), fl(92.3)
	rows := figuresRows(d)
	if len(rows) != 33 {
		t.Errorf("%d rows, want the fixture's 30 and 3 more", len(rows))
	}
	for _, w := range []struct{ prefix, figure, goal, status string }{
		{"agent replay, needed-in-window", "75.4 (baseline 82.6: system prompt, task and the newest messages that fit; compact-at-limit 54.4; 69 names)",
			">= 95, and >= 10 points above the baseline", "not yet: below 95, less than 10 points above the baseline"},
		{"agent replay, cached prefix", "90.9% (compact-at-limit 91.9%, baseline 59.6%)", ">= 85%", "met"},
		{"agent replay, cost per call", "1,420 = 1.16x compact-at-limit's 1,221 (baseline 4,625; window tokens per call 7,817, compact-at-limit 7,065)",
			"<= 1.25x compact-at-limit's", "met"},
		{"agent replay, prompted recall", "92.3% (284 questions)", ">= 90%", "met"},
	} {
		r := figRowOf(t, rows, w.prefix)
		if r.Figure != w.figure || r.Goal != w.goal || r.Status != w.status {
			t.Errorf("%s:\n got  %q | %q | %q\n want %q | %q | %q", w.prefix, r.Figure, r.Goal, r.Status, w.figure, w.goal, w.status)
		}
	}
	a.Cached, a.CostVs, a.PromptedRecall = fl(84.9), fl(1.26), fl(89.9)
	rows = figuresRows(d)
	for _, p := range []string{"agent replay, cached prefix", "agent replay, cost per call", "agent replay, prompted recall"} {
		if r := figRowOf(t, rows, p); r.Status != figNotYet {
			t.Errorf("%s: status %q past its goal", p, r.Status)
		}
	}
	block := renderFigures(d)
	if !strings.Contains(block, "| agent replay, prompted recall") {
		t.Errorf("the README block lacks the prompted recall row:\n%s", block)
	}
}

// The header says how busy the machine was, when the document says it;
// loadAvg reads the one-minute figure of a loadavg file.
func TestFiguresHeaderLoadAverage(t *testing.T) {
	t.Parallel()
	m := figuresMeta{Date: "2026-11-22T01:40:00Z", Commit: "abc1234", GOOS: "linux", GOARCH: "amd64", CPUs: 2, CPUModel: "Test CPU", GoVersion: "go1.26.8", Command: "ctxd-bench figures"}
	if h := figuresHeader(m); strings.Contains(h, "load average") {
		t.Errorf("a document without a load average got one: %s", h)
	}
	m.LoadAvg = "0.41 / 1.20"
	if h := figuresHeader(m); !strings.Contains(h, "load average at start / end: 0.41 / 1.20 (on 2 CPUs)") {
		t.Errorf("header lacks the load average: %s", h)
	}
	p := filepath.Join(t.TempDir(), "loadavg")
	if err := os.WriteFile(p, []byte("0.52 0.40 0.30 1/200 1234\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := loadAvg(p); got != "0.52" {
		t.Errorf("loadAvg = %q, want 0.52", got)
	}
	if got := loadAvg(filepath.Join(t.TempDir(), "none")); got != "unknown" {
		t.Errorf("loadAvg of a missing file = %q, want unknown", got)
	}
}

// The header names the evaluation data by $BENCH_DATA, not by where it
// sits on the measuring machine.
func TestFiguresCommandNamesBenchData(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ v, dir, want string }{
		{"../shared/bench/agent-dev/runs.jsonl", "../shared/bench", "$BENCH_DATA/agent-dev/runs.jsonl"},
		{"/data/bench/README.md", "/data/bench/", "$BENCH_DATA/README.md"},
		{"/data/benchmark/README.md", "/data/bench", "/data/benchmark/README.md"},
		{"bin/ctxd", "", "bin/ctxd"},
		{"it's", "", `'it'\''s'`},
	} {
		if got := benchDataPath(c.v, c.dir); got != c.want {
			t.Errorf("benchDataPath(%q, %q) = %q, want %q", c.v, c.dir, got, c.want)
		}
	}
}
