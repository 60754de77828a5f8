package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// The JSON reports a figures run is rendered from, by file name. A live run
// renders from the same bytes it saves, so --from-json renders the same table.
const (
	figDocMeta    = "meta.json"    // the header: date, commit, machine, command
	figDocFloor   = "floor.json"   // the BM25 floor per category
	figDocEval    = "eval.json"    // `ctxd-bench eval --json`
	figDocIngest  = "ingest.json"  // `ctxd-bench bench --json`: the ingest goal's run
	figDocBench   = "bench.json"   // the bench-size ingest and start-up
	figDocLatency = "latency.json" // one client on the bench data set
	figDocLoad    = "load.json"    // --clients for --duration on it
	figDocAgent   = "agent.json"   // `ctxd-bench eval --agent --json`: the agent replay
	figDocGateway = "gateway.json" // `ctxd-bench eval --agent --gateway --json`: the same through the gateway
)

var figDocNames = []string{figDocMeta, figDocFloor, figDocEval, figDocIngest, figDocBench, figDocLatency, figDocLoad, figDocAgent,
	figDocGateway}

type figuresDocs map[string][]byte

func (d figuresDocs) save(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("--save-json: %w", err)
	}
	for _, name := range figDocNames {
		if err := os.WriteFile(filepath.Join(dir, name), d[name], 0o644); err != nil {
			return fmt.Errorf("--save-json: %w", err)
		}
	}
	return nil
}

func loadFiguresDocs(dir string) (figuresDocs, error) {
	d := figuresDocs{}
	for _, name := range figDocNames {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--from-json: %s has no %s (a --save-json run writes %v)", dir, name, figDocNames)
		}
		if err != nil {
			return nil, fmt.Errorf("--from-json: %w", err)
		}
		d[name] = b
	}
	return d, nil
}

// figuresMeta is the header of the table.
type figuresMeta struct {
	Date      string `json:"date"` // UTC, RFC 3339
	Commit    string `json:"commit"`
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	Command   string `json:"command"`
	// LoadAvg is the one-minute load average as the measurement began and
	// as it ended ("0.4 / 1.2"); older documents have none.
	LoadAvg string `json:"load_avg,omitempty"`
}

// figEval is the part of `ctxd-bench eval --json` the table reads.
type figEval struct {
	K      []int                         `json:"k"`
	Mode   string                        `json:"mode"`
	Table  map[string]map[string]float64 `json:"table"` // category -> "n", "recall@5", ...
	Ingest struct {
		Turns       int     `json:"turns"`
		TurnsPerSec float64 `json:"turns_per_sec"`
	} `json:"ingest"`
	Context *struct {
		Window int                           `json:"window"`
		Budget int                           `json:"budget"`
		Table  map[string]map[string]float64 `json:"table"` // category -> "n", "ctxd", "sliding", "bm25-pack"
		Calls  int                           `json:"calls"`
		P50    float64                       `json:"p50_ms"`
		P99    float64                       `json:"p99_ms"`
	} `json:"context"`
}

// figAgent is `ctxd-bench eval --agent --json`: the agent replay's figures under
// agent_replay.py's names. Those the script may leave out are pointers.
type figAgent struct {
	Runs          int      `json:"runs"`
	Calls         int      `json:"context_calls"`
	Writes        int      `json:"writes"`
	Needed        float64  `json:"needed_in_window_pct"`
	Baseline      float64  `json:"needed_in_window_baseline_pct"`
	NeededNames   int      `json:"needed_tokens"`
	LatestPresent float64  `json:"latest_present_pct"`
	LatestWhole   float64  `json:"latest_whole_pct"`
	OverBudget    int      `json:"over_budget_windows"`
	Invalid       int      `json:"invalid_pairs"`
	OverHardLimit int      `json:"writes_over_hard_limit"`
	Compactions   float64  `json:"compactions_per_100_messages"`
	Summaries     float64  `json:"live_summaries_per_original"`
	Storage       *float64 `json:"storage_bytes_per_content_byte"` // null: not measured (a --server run)
	P50           *float64 `json:"context_ms_p50"`
	P99           *float64 `json:"context_ms_p99"`
	Growth        *float64 `json:"context_latency_growth_median"` // null: no run of 8+ calls
	Window        int      `json:"window"`
	Budget        int      `json:"budget"`
	// The cost figures and prompted recall (issue 23); nil in reports
	// written before them.
	NeededCompact  *float64 `json:"needed_in_window_compact_at_limit_pct"`
	TokensPerCall  *int     `json:"window_tokens_per_call"`
	Cached         *float64 `json:"cached_prefix_pct"`
	Cost           *int     `json:"cost_per_call"`
	BaseCached     *float64 `json:"baseline_cached_prefix_pct"`
	BaseCost       *int     `json:"baseline_cost_per_call"`
	CompactTokens  *int     `json:"compact_at_limit_window_tokens_per_call"`
	CompactCached  *float64 `json:"compact_at_limit_cached_prefix_pct"`
	CompactCost    *int     `json:"compact_at_limit_cost_per_call"`
	CostVs         *float64 `json:"cost_vs_compact_at_limit"`
	Probes         *int     `json:"probes"`
	PromptedRecall *float64 `json:"prompted_recall_pct"`
}

// figGateway is `ctxd-bench eval --agent --gateway --json`: the agent
// replay through the drop-in gateway, measured on what the model was sent.
type figGateway struct {
	Runs          int     `json:"runs"`
	Calls         int     `json:"model_calls"`
	Needed        float64 `json:"needed_in_window_pct"`
	Baseline      float64 `json:"needed_in_window_baseline_pct"`
	LatestPresent float64 `json:"latest_present_pct"`
	LatestWhole   float64 `json:"latest_whole_pct"`
	OverWindow    int     `json:"requests_over_window"`
	Invalid       int     `json:"invalid_pairs"`
	OverHardLimit int     `json:"writes_over_hard_limit"`
	P50           float64 `json:"gateway_ms_p50"`
	P99           float64 `json:"gateway_ms_p99"`
	FlushTurns    int     `json:"flush_turns"`
	Window        int     `json:"window"`
	Budget        int     `json:"budget"`
}

// figuresData is everything the table is rendered from.
type figuresData struct {
	Meta    figuresMeta
	Floor   figuresFloor
	Eval    figEval
	Ingest  *benchReport
	Bench   *benchReport
	Latency *benchReport
	Load    *benchReport
	Agent   figAgent
	Gateway figGateway
}

func parseFiguresDocs(d figuresDocs) (*figuresData, error) {
	data := &figuresData{Ingest: &benchReport{}, Bench: &benchReport{}, Latency: &benchReport{}, Load: &benchReport{}}
	into := map[string]any{figDocMeta: &data.Meta, figDocFloor: &data.Floor, figDocEval: &data.Eval,
		figDocIngest: data.Ingest, figDocBench: data.Bench, figDocLatency: data.Latency, figDocLoad: data.Load,
		figDocAgent: &data.Agent, figDocGateway: &data.Gateway}
	for _, name := range figDocNames {
		if err := json.Unmarshal(d[name], into[name]); err != nil {
			return nil, fmt.Errorf("figures: read %s: %w", name, err)
		}
	}
	switch {
	case data.Eval.Table == nil || len(data.Eval.K) == 0:
		return nil, fmt.Errorf("figures: %s has no recall table", figDocEval)
	case data.Eval.Context == nil:
		return nil, fmt.Errorf("figures: %s has no evidence-in-window part (it was run with --no-context)", figDocEval)
	case data.Ingest.Ingest == nil || data.Bench.Ingest == nil:
		return nil, fmt.Errorf("figures: %s or %s has no ingest", figDocIngest, figDocBench)
	case data.Bench.Startup == nil:
		return nil, fmt.Errorf("figures: %s has no start-up (it was run without --startup)", figDocBench)
	case data.Latency.Mixed == nil || data.Load.Mixed == nil:
		return nil, fmt.Errorf("figures: %s or %s has no mixed load", figDocLatency, figDocLoad)
	case data.Agent.Runs == 0 || data.Agent.P50 == nil || data.Agent.P99 == nil:
		return nil, fmt.Errorf("figures: %s has no agent replay figures", figDocAgent)
	case data.Gateway.Runs == 0 || data.Gateway.Calls == 0:
		return nil, fmt.Errorf("figures: %s has no gateway replay figures", figDocGateway)
	}
	for _, op := range []string{benchOpSearchAll, benchOpSearchSession, benchOpContext} {
		if _, ok := data.Latency.Mixed.Ops[op]; !ok {
			return nil, fmt.Errorf("figures: %s has no %s operations", figDocLatency, op)
		}
	}
	return data, nil
}

// figCategories is the categories of an eval table in score.py's order,
// OVERALL last.
func figCategories(table map[string]map[string]float64) []string {
	counts := map[string]int{}
	for c, row := range table {
		counts[c] = int(row["n"])
	}
	return slices.DeleteFunc(categoryOrder(counts), func(c string) bool { return table[c] == nil })
}
