package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeAgentRun writes a synthetic recorded run, built so that its needs
// can be counted by hand (the names of agentTestNeeded):
//
//	0 system, 1 task: no names of 6+ characters with _ or camelCase
//	2/3   grep, result: src/widgets/table_store.py, table_store, load_widget_table
//	4/5   cat, result: about 3,000 tokens of filler and render_panel_rows
//	6/7   cat, result: check_cache_key
//	8-13  ls, pwd, date and their results: no names
//	14/15 the turn that uses all five names again, 8+ messages after 3, 5 and 7
//	16/17 echo and its result: an 8th context call, for the latency growth
//
// Before message 14 the baseline with a 2,500-token budget holds 0, 1 and
// 6..13 (5 alone is about 3,000 tokens), so it shows check_cache_key's line
// only: 1 of 5. With 12,000 tokens it holds everything: 5 of 5. (The
// budget must leave room for the prompt: 8,000 characters of message 5.)
func writeAgentRun(t *testing.T, id string) string {
	t.Helper()
	words := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "theta", "kappa", "lambda", "sigma"}
	var filler strings.Builder
	for i := range 3000 {
		filler.WriteString(words[i%len(words)])
		if i%12 == 11 {
			filler.WriteString("\n")
		} else {
			filler.WriteString(" ")
		}
	}
	call := func(id, content, command string) map[string]any {
		args, _ := json.Marshal(map[string]string{"command": command})
		return map[string]any{"role": "assistant", "content": content, "tool_calls": []map[string]any{
			{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}}
	}
	result := func(id, content string) map[string]any {
		return map[string]any{"role": "tool", "tool_call_id": id, "content": content}
	}
	msgs := []map[string]any{
		{"role": "system", "content": "You are a careful coding agent. Answer with one shell command per turn."},
		{"role": "user", "content": "Fix the crash in the report exporter."},
		call("c1", "THOUGHT: find the loader.", "grep -rn widget src"),
		result("c1", "src/widgets/table_store.py:12:def load_widget_table(path, strict=True):\n"+
			"src/widgets/table_store.py:40:    rows = load_widget_table(p)"),
		call("c2", "THOUGHT: look at the panel.", "cat src/panel.txt"),
		result("c2", filler.String()+"def render_panel_rows(rows): return [r for r in rows]\n"),
		call("c3", "THOUGHT: check the cache.", "cat cache.cfg"),
		result("c3", "key = check_cache_key(entry)\nttl = 30"),
		call("c4", "THOUGHT: list the files.", "ls"),
		result("c4", "README\nsetup"),
		call("c5", "THOUGHT: where am I?", "pwd"),
		result("c5", "/repo"),
		call("c6", "THOUGHT: what time is it?", "date"),
		result("c6", "Mon Jan 1 00:00:00 UTC 2024"),
		call("c7", "THOUGHT: load_widget_table calls render_panel_rows and check_cache_key.",
			"sed -n 1,60p src/widgets/table_store.py"),
		result("c7", "1 import os"),
		call("c8", "THOUGHT: done.", "echo done"),
		result("c8", "done"),
	}
	line, err := json.Marshal(map[string]any{"id": id, "source": "test", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(path, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var agentTestNeeded = []string{"check_cache_key", "load_widget_table", "render_panel_rows", "src/widgets/table_store.py", "table_store"}

// figureMap is a report's figures by key.
func figureMap(rep *agentReport) map[string]any {
	m := map[string]any{}
	for _, f := range rep.figures() {
		m[f.Key] = f.Value
	}
	return m
}

func checkFigures(t *testing.T, name string, got map[string]any, want map[string]any) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if got[k] != want[k] {
			t.Errorf("%s: %s = %v (%T), want %v (%T)", name, k, got[k], got[k], want[k], want[k])
		}
	}
}

func TestEvalAgentReplay(t *testing.T) {
	t.Parallel()
	runs := writeAgentRun(t, "mini:repo/issue#1")
	ts := startServer(t, t.TempDir())
	sid := "agent-mini:repo-issue-1"
	run := func(window, budget int) (*agentReport, map[string]any) {
		t.Helper()
		rep, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Server: ts.URL, Window: window, Budget: budget})
		if err != nil {
			t.Fatalf("window %d, budget %d: %v", window, budget, err)
		}
		if rep.Acc.Needed != len(agentTestNeeded) {
			t.Errorf("window %d, budget %d: %d names needed, want %d %v", window, budget, rep.Acc.Needed,
				len(agentTestNeeded), agentTestNeeded)
		}
		return rep, figureMap(rep)
	}
	counts := map[string]any{"runs": 1, "context_calls": 8, "writes": 9, "needed_tokens": 5,
		"invalid_pairs": 0, "over_budget_windows": 0, "storage_bytes_per_content_byte": nil}

	// Everything fits the baseline. (Not necessarily ctxd's window: the
	// server may prune old tool outputs that would fit.)
	allRep, all := run(16000, 12000)
	checkFigures(t, "all fits", all, counts)
	checkFigures(t, "all fits", all, map[string]any{"needed_in_window_baseline_pct": 100.0,
		"latest_present_pct": 100.0, "latest_whole_pct": 100.0, "compactions_per_100_messages": 0.0,
		"writes_over_hard_limit": 0, "window": 16000, "budget": 12000})
	if g, ok := all["context_latency_growth_median"].(float64); !ok || g <= 0 {
		t.Errorf("latency growth over 8 calls: %v", all["context_latency_growth_median"])
	}

	// A 2,500-token budget: the baseline loses the lines of messages 3 and 5.
	tightRep, tight := run(16000, 2500)
	checkFigures(t, "budget 2500", tight, counts)
	checkFigures(t, "budget 2500", tight, map[string]any{"needed_in_window_baseline_pct": 20.0})
	for _, f := range []map[string]any{all, tight} {
		if v := f["needed_in_window_pct"].(float64); v < 0 || v > 100 {
			t.Errorf("needed in window %v", v)
		}
	}

	// The script's text report.
	var text strings.Builder
	if err := tightRep.writeText(&text); err != nil {
		t.Fatal(err)
	}
	if l := lines(text.String()); len(l) != 30 || l[0] != "runs                               1" ||
		!slices.Contains(l, "needed_in_window_baseline_pct      20.0") ||
		!slices.Contains(l, "storage_bytes_per_content_byte     None") ||
		!slices.Contains(l, "budget                             2500") ||
		!strings.HasPrefix(l[len(l)-1], "cost_vs_compact_at_limit           ") {
		t.Errorf("text report, as the script prints it:\n%s", text.String())
	}

	// The cost figures. With everything fitting, compact-at-limit never
	// cuts: it is the baseline, and each window repeats the previous one
	// whole.
	checkFigures(t, "all fits", all, map[string]any{"needed_in_window_compact_at_limit_pct": 100.0,
		"compact_at_limit_cached_prefix_pct": all["baseline_cached_prefix_pct"],
		"compact_at_limit_cost_per_call":     all["baseline_cost_per_call"]})
	for name, rep := range map[string]*agentReport{"all fits": allRep, "budget 2500": tightRep} {
		for k, v := range rep.Acc.Views {
			if v.Cached <= 0 || v.Cached >= v.Tokens {
				t.Errorf("%s: window %d: %d of %d tokens cached", name, k, v.Cached, v.Tokens)
			}
		}
		f := figureMap(rep)
		v := rep.Acc.Views[viewCtxd]
		if want := int(math.RoundToEven((float64(v.Tokens) - 0.9*float64(v.Cached)) / 8)); f["cost_per_call"] != want {
			t.Errorf("%s: cost per call %v, want %d", name, f["cost_per_call"], want)
		}
	}

	// A 600-token window cannot hold the run, even with the 3,000-token
	// result cut to its place and old outputs pruned: the session compacts,
	// and the figure is the server's own count per 100 messages.
	_, small := run(600, 500)
	checkFigures(t, "window 600", small, counts)
	st := ts.sessionStatus(t, sid)
	compactions, _ := st["compactions"].(float64)
	if compactions < 1 {
		t.Fatalf("window 600: the session never compacted: %v", st)
	}
	summaries, _ := st["summaries"].(float64)
	checkFigures(t, "window 600", small, map[string]any{
		"compactions_per_100_messages": pyRound(100*compactions/18, 1),
		"live_summaries_per_original":  pyRound(summaries/18, 3),
	})
	// Each run replaced the session rather than storing its 18 messages
	// again (summaries come on top, but not 18 of them).
	total := 0.0
	for _, n := range st["messages"].(map[string]any) {
		total += n.(float64)
	}
	if total < 18 || total >= 36 {
		t.Errorf("the session holds %v messages after three replays of 18", st["messages"])
	}
}

// Without --server the replay runs its own server and measures its data dir.
func TestEvalAgentInProcess(t *testing.T) {
	t.Parallel()
	runs := writeAgentRun(t, "in-process")
	rep, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Window: 16000, Budget: 12000})
	if err != nil {
		t.Fatal(err)
	}
	f := figureMap(rep)
	if v, ok := f["storage_bytes_per_content_byte"].(float64); !ok || v <= 0 {
		t.Errorf("storage bytes per content byte: %v", f["storage_bytes_per_content_byte"])
	}
	if rep.ServerDesc == "" || strings.HasPrefix(rep.ServerDesc, "http") {
		t.Errorf("server %q, want the in-process one", rep.ServerDesc)
	}
}

func TestEvalAgentCLI(t *testing.T) {
	t.Parallel()
	runs := writeAgentRun(t, "cli")
	ts := startServer(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "figures.json")
	// The script's window and budget by default; JSON on stdout and in --out.
	r := ts.cli(t, exitOK, "eval", "--agent", runs, "--policy", `{"target_pct": 0.3}`, "--json", "--out", out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := decodeJSON(t, string(b))
	if doc["needed_in_window_baseline_pct"] != 100.0 || doc["needed_tokens"] != 5.0 || doc["window"] != 16000.0 ||
		doc["budget"] != 12000.0 || doc["storage_bytes_per_content_byte"] != nil || string(b) != r.Out {
		t.Errorf("--out JSON:\n%s\nstdout:\n%s", b, r.Out)
	}
	st := ts.sessionStatus(t, "agent-cli")
	if pol, _ := st["policy"].(map[string]any); pol == nil || pol["target_pct"] != 0.3 {
		t.Errorf("--policy not applied: %v", st["policy"])
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--agent", runs, "--turns", "t.jsonl"}, "--turns: does not apply with --agent"},
		{[]string{"eval", "--agent", runs, "-k", "5"}, "--k: does not apply with --agent"},
		{[]string{"eval", "--agent", runs, "--policy", "[1]"}, "--policy"},
		{[]string{"eval", "--agent", runs, "--limit", "-1"}, "--limit"},
		{[]string{"eval", "--agent", runs, "--window", "100"}, "--window"},
		{[]string{"eval", "--turns", "t", "--questions", "q", "--out", "o", "--limit", "2"}, "--limit: only with --agent"},
		{[]string{"eval", "--turns", "t"}, `required flag(s) "out", "questions" not set`},
	} {
		r := runCLI(t, nil, c.args...)
		if r.Code != exitUsage || !strings.Contains(r.Err, c.want) {
			t.Errorf("ctxd %s: exit %d, want %d with %q:\n%s", strings.Join(c.args, " "), r.Code, exitUsage, c.want, r.Err)
		}
	}
}

// The names and lines the replay reads, against what bench/agent_replay.py
// (Python 3.11's re and str) gives for the same text.
func TestEvalAgentNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		want []string
	}{
		{"see django/db/models/sql/compiler.py:12 and setup.cfg, get_order_by()", []string{
			"django/db/models/sql/compiler.py", "get_order_by", "setup.cfg"}},
		{"queryCount _private_ __init__ __dunder_x ab_c", []string{"__dunder_x", "queryCount"}},
		// Python's \b is Unicode: no boundary between ï and v, nor after "py" before é.
		{"naïve_value mod.pyé mod.py, x.pyi", []string{"mod.py", "x.pyi"}},
		{"a/b/ foo.c.py ./x.json", []string{"./x.json", "a/b", "foo.c"}},
		{"resolve_lookup9 9abc_def abc_defé", []string{"resolve_lookup9"}},
	} {
		got := slices.Sorted(maps.Keys(agentSalient(c.text)))
		if !slices.Equal(got, c.want) {
			t.Errorf("salient(%q) = %q, want %q", c.text, got, c.want)
		}
	}

	long := strings.Repeat("é", 100) + " target_name " + strings.Repeat("b", 100)
	for _, c := range []struct {
		text, token string
		want        []string
	}{
		{"x\r\n  a target_name\x1c\tb  \nnone\x1dtarget_name", "target_name", []string{"a target_name", "target_name"}},
		{"\u00a0 one\t\ttarget_name \u2028", "target_name", []string{"one target_name"}},
		// 213 characters, the name at 101: [101-80+5, +160), counted in characters, not bytes.
		{long, "target_name", []string{strings.Repeat("é", 74) + " target_name " + strings.Repeat("b", 73)}},
	} {
		if got := agentContextLines(c.text, c.token); !slices.Equal(got, c.want) {
			t.Errorf("context_lines(%q, %q) = %q, want %q", c.text, c.token, got, c.want)
		}
	}
	if got := agentNorm("a \x1f\x0b b\u3000\u200bc"); got != "a b \u200bc" {
		t.Errorf("norm: %q", got)
	}
	if got := agentSessionID("mini:django__django-1/ü" + strings.Repeat("x", 200)); len(got) != len("agent-")+100 ||
		!strings.HasPrefix(got, "agent-mini:django__django-1--xx") {
		t.Errorf("session id %q", got)
	}
	for v, want := range map[any]string{nil: "None", 100.0: "100.0", 0.454: "0.454", 7: "7", 12000: "12000"} {
		if got := pyStr(v); got != want {
			t.Errorf("pyStr(%v) = %q, want %q", v, got, want)
		}
	}
	if got := fmt.Sprint(pyRound(0.25, 1), pyRound(2.675, 2), pyRound(98.865, 2)); got != "0.2 2.67 98.86" {
		t.Errorf("pyRound: %s", got)
	}
}

// The replay through the gateway measures what the model was sent, with
// the context endpoint's definitions: the same names needed (the same
// baseline, which does not depend on the server), and the model's
// requests fit its window less the answer. Under a budget the baseline
// cannot meet, the gateway's window still shows what the context
// endpoint's shows.
func TestEvalAgentGateway(t *testing.T) {
	t.Parallel()
	runs := writeAgentRun(t, "gw")
	for _, budget := range []int{12000, 2500} {
		o := agentOptions{Runs: runs, Window: 16000, Budget: budget}
		direct, err := runAgentEval(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		o.Gateway = true
		gw, err := runAgentEval(context.Background(), o)
		if err != nil {
			t.Fatalf("budget %d, through the gateway: %v", budget, err)
		}
		f := figureMap(gw)
		checkFigures(t, "through the gateway", f, map[string]any{"through": "gateway", "runs": 1, "model_calls": 8,
			"needed_tokens": len(agentTestNeeded), "requests_over_window": 0, "invalid_pairs": 0,
			"latest_present_pct": 100.0, "latest_whole_pct": figureMap(direct)["latest_whole_pct"],
			"needed_in_window_baseline_pct": figureMap(direct)["needed_in_window_baseline_pct"]})
		if gw.Acc.NeededCtxd < direct.Acc.NeededCtxd {
			t.Errorf("budget %d: the model was shown %d of the %d names needed, the context endpoint %d", budget,
				gw.Acc.NeededCtxd, gw.Acc.Needed, direct.Acc.NeededCtxd)
		}
		if p50, ok := f["gateway_ms_p50"].(float64); !ok || p50 <= 0 {
			t.Errorf("gateway time p50: %v", f["gateway_ms_p50"])
		}
	}
	if _, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Server: "http://127.0.0.1:1", Window: 16000,
		Budget: 12000, Gateway: true}); err == nil || !strings.Contains(err.Error(), "--gateway") {
		t.Errorf("--gateway with --server: %v", err)
	}
}

// --probes: late in a long run the user asks about a name and number an
// early tool output held; the question is stored and its window measured.
// Here the server brings the line back for the one question asked.
func TestEvalAgentProbes(t *testing.T) {
	msgs := []map[string]any{
		{"role": "system", "content": "You are a coding agent."},
		{"role": "user", "content": "Fix it."},
	}
	for i := range 40 {
		id := fmt.Sprintf("c%d", i)
		out := "ok"
		if i == 0 {
			out = "retry_budget_limit = 73921"
		}
		args, _ := json.Marshal(map[string]string{"command": "true"})
		msgs = append(msgs, map[string]any{"role": "assistant", "content": "next", "tool_calls": []map[string]any{
			{"id": id, "type": "function", "function": map[string]any{"name": "bash", "arguments": string(args)}}}},
			map[string]any{"role": "tool", "tool_call_id": id, "content": out})
	}
	line, err := json.Marshal(map[string]any{"id": "probe-run", "messages": msgs})
	if err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(runs, append(line, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, t.TempDir())
	rep, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Server: ts.URL, Window: 16000, Budget: 12000, Probes: 1})
	if err != nil {
		t.Fatal(err)
	}
	f := figureMap(rep)
	checkFigures(t, "probes", f, map[string]any{"probes": 1, "prompted_recall_pct": 100.0, "context_calls": 40})
	if _, ok := f["prompted_recall_pct"]; !ok {
		t.Fatal("no prompted recall figure")
	}
	// The target: the only tool output with a name or number, 30+ messages back.
	j, tok, ok := agentProbeTarget(loadRunMessages(t, runs), 2, 80, map[string]struct{}{}, agentProbeRNG("probe-run"))
	if !ok || j != 3 || (tok != "retry_budget_limit" && tok != "73921") {
		t.Errorf("probe target %d %q %v", j, tok, ok)
	}
	if _, err := runAgentEval(context.Background(), agentOptions{Runs: runs, Server: ts.URL, Window: 16000, Budget: 12000, Probes: -1}); err == nil {
		t.Error("--probes -1 accepted")
	}
}

func loadRunMessages(t *testing.T, path string) []agentMessage {
	t.Helper()
	runs, err := loadAgentRuns(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	return runs[0].Messages
}
