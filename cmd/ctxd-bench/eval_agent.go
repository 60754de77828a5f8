package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/metrics"
)

// `ctxd-bench eval --agent` is bench/agent_replay.py in Go: it replays recorded
// coding-agent runs through the API as the agent would have used it and
// measures what the agent's next turn needed against what the window
// showed, beside a sliding-window baseline. Every figure is defined as the
// script defines it, and the code follows the script step by step so that
// the two can be compared number for number; the text functions are in
// eval_agent_names.go.

// agentOptions is what `ctxd-bench eval --agent` is told.
type agentOptions struct {
	Runs     string
	Server   string // empty: an in-process server on a temporary data dir
	Window   int    // context_window of each run's session
	Budget   int    // max_tokens of each context call, and the baseline's budget
	Limit    int    // replay the first Limit runs; 0: all
	Policy   string // JSON object of session settings, PUT with the window
	Progress io.Writer
	// Ctxd is the ctxd binary to serve from, as a `ctxd serve` child
	// process, as agent_replay.py does: the client's decoding and garbage
	// then do not run in the server's process (the in-process latency
	// growth was 2.0 where the script measured 1.4). Empty: serve in this
	// process (tests).
	Ctxd string
	// Gateway replays through the drop-in gateway instead (eval_gateway.go),
	// in the API GatewayAPI names (gatewayOpenAI when empty).
	Gateway    bool
	GatewayAPI string
	// Probes is how many questions about old tool outputs interrupt each
	// run (eval_agent_cache.go); 0: none.
	Probes int
	// Chat: Runs is a LoCoMo-style turns file, each conversation replayed
	// as a chat (eval_chat.go).
	Chat bool
}

const (
	agentDefaultWindow = 16000
	agentDefaultBudget = 12000
	agentSessionPrefix = "agent-"
	agentPromptChars   = 8000 // of the newest input, sent as the context call's prompt
	agentHardLimit     = 0.85 // of the window: a write leaving the session above it counts
)

// check refuses, before anything runs, what the API would refuse on the
// first request.
func (o *agentOptions) check() error {
	switch {
	case o.Window < 256 || o.Window > 10_000_000:
		return usageErrorf("--window: %d is outside 256..10000000 tokens (the API's range)", o.Window)
	case o.Budget < 1 || o.Budget > 10_000_000:
		return usageErrorf("--budget: %d is outside 1..10000000 tokens", o.Budget)
	case o.Limit < 0:
		return usageErrorf("--limit: %d is negative (0 replays every run)", o.Limit)
	case o.Probes < 0 || o.Probes > 100:
		return usageErrorf("--probes: %d is outside 0..100", o.Probes)
	case o.GatewayAPI != "" && o.GatewayAPI != gatewayOpenAI && o.GatewayAPI != gatewayAnthropic:
		return usageErrorf("--gateway-api: %q is not openai or anthropic", o.GatewayAPI)
	case o.GatewayAPI != "" && !o.Gateway:
		return usageErrorf("--gateway-api: only with --gateway")
	case o.Probes > 0 && o.Gateway:
		return usageErrorf("--probes: not through the gateway (its model answers with the recorded turns only)")
	}
	_, err := o.sessionSettings()
	return err
}

// sessionSettings is the PUT body of each session: --policy with the
// window set (over any context_window in --policy, as the script does).
func (o *agentOptions) sessionSettings() (*api.SessionIn, error) {
	settings := &api.SessionIn{}
	if o.Policy != "" {
		dec := json.NewDecoder(strings.NewReader(o.Policy))
		if err := dec.Decode(&settings); err != nil || settings == nil || dec.More() {
			return nil, usageErrorf("--policy: %q is not a JSON object of session settings", o.Policy)
		}
	}
	settings.ContextWindow = &o.Window
	return settings, nil
}

// agentRun is one line of the runs file.
type agentRun struct {
	ID       string         `json:"id"`
	Messages []agentMessage `json:"messages"`
}

// agentMessage is a recorded message. ToolCalls stays raw so that it is
// stored as recorded; calls is its parsed form.
type agentMessage struct {
	Role       string          `json:"role"`
	Content    string          `json:"content"` // null reads as "", as the script's `or ""`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	calls      []agentToolCall
}

// agentToolCall is the part of a tool call the replay reads. ID is a
// pointer because the script tells a missing id (None) from any string.
type agentToolCall struct {
	ID       *string `json:"id"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// agentWindowMessage is a message of a context window, as the replay reads it.
type agentWindowMessage struct {
	ID         string          `json:"id"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolCalls  []agentToolCall `json:"tool_calls"`
	ToolCallID *string         `json:"tool_call_id"`
}

// agentWindow is the window as the replay reads it. The server leaves out
// an empty tool_call_id, which the script reads as None.
func agentWindow(msgs []api.WindowMessage) []agentWindowMessage {
	out := make([]agentWindowMessage, len(msgs))
	for i, m := range msgs {
		out[i] = agentWindowMessage{ID: m.ID, Role: string(m.Role), Content: m.Content}
		if m.ToolCallID != "" {
			out[i].ToolCallID = &m.ToolCallID
		}
		for _, tc := range m.ToolCalls {
			c := agentToolCall{ID: &tc.ID}
			c.Function.Name, c.Function.Arguments = tc.Function.Name, tc.Function.Arguments
			out[i].ToolCalls = append(out[i].ToolCalls, c)
		}
	}
	return out
}

// agentNone stands for Python's None among tool call ids, which are
// otherwise strings: it is equal to itself and to no id.
const agentNone = "\x00None"

func pyKey(s *string) string {
	if s == nil {
		return agentNone
	}
	return *s
}

// agentText is the script's text_of(): the content, then each tool call's
// name and arguments on a line of their own.
func agentText(content string, calls []agentToolCall) string {
	if len(calls) == 0 {
		return content
	}
	var b strings.Builder
	b.WriteString(content)
	for _, c := range calls {
		b.WriteString("\n" + c.Function.Name + " " + c.Function.Arguments)
	}
	return b.String()
}

func (m *agentMessage) text() string { return agentText(m.Content, m.calls) }

// loadAgentRuns reads every run, then keeps the first limit (0: all).
func loadAgentRuns(path string, limit int) ([]agentRun, error) {
	var runs []agentRun
	err := readJSONL(path, func(_ int, dec *json.Decoder) error {
		var r agentRun
		if err := dec.Decode(&r); err != nil {
			return fmt.Errorf("bad run: %w", err)
		}
		for i := range r.Messages {
			m := &r.Messages[i]
			if len(m.ToolCalls) > 0 && string(m.ToolCalls) != "null" {
				if err := json.Unmarshal(m.ToolCalls, &m.calls); err != nil {
					return fmt.Errorf("run %q: message %d: tool_calls: %w", r.ID, i, err)
				}
			}
		}
		if !slices.ContainsFunc(r.Messages, func(m agentMessage) bool { return m.Role == "assistant" }) {
			return fmt.Errorf("run %q: no assistant message to replay", r.ID)
		}
		if r.Messages[0].Role == "assistant" {
			return fmt.Errorf("run %q: starts with an assistant message: nothing to store before the first turn", r.ID)
		}
		runs = append(runs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load agent runs: %w", err)
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("load agent runs: %s has no runs", path)
	}
	if limit > 0 && limit < len(runs) {
		runs = runs[:limit]
	}
	return runs, nil
}

// agentSessionID is the script's session id: agent- and the run id with
// each character outside the API's alphabet replaced by -, cut to 100.
func agentSessionID(runID string) string {
	var b strings.Builder
	for _, r := range runID {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	s := b.String()
	if len(s) > 100 {
		s = s[:100] // ASCII by now: bytes are characters
	}
	return agentSessionPrefix + s
}

// agentAcc sums the figures over runs, as the script's acc.
type agentAcc struct {
	Calls, Writes, OverBudget, LatestPresent, LatestWhole, Invalid, OverHardLimit int
	Needed, NeededCtxd, NeededBase, NeededCompact                                 int
	Views                                                                         [agentViews]agentView
	Probes, ProbesFound                                                           int
	Compactions, Summaries, Originals                                             int
	ContentBytes                                                                  int
	Growth                                                                        []float64 // per run of 8+ calls
	Lat                                                                           []float64 // seconds, every context call
}

// agentReport is what a replay measured.
type agentReport struct {
	Options    agentOptions
	ServerDesc string
	Runs       int
	Acc        agentAcc
	StoreBytes int64 // of the in-process server's data dir; 0: not measured (--server)
	FlushTurns int   // through the gateway: the flush turns it sent the model
	// ProbeRun is the same replay with --probes, whose prompted recall
	// this report's figures carry (make figures); nil: none.
	ProbeRun *agentReport
	// through the gateway: the prompt cache the model reported, and what
	// the sessions' status measured of it, in % of prompt tokens
	CachedPrefixPct, SessionCacheHitPct float64
	CacheWritePct                       float64 // Anthropic's cache writes
	// through the gateway: the cost per call of what the model was sent
	// (uncached + a tenth of cached, as the model reported them)
	ModelCostPerCall float64
}

// runAgentEval replays the runs against the server and sums the figures.
func runAgentEval(ctx context.Context, o agentOptions) (_ *agentReport, err error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	load := loadAgentRuns
	if o.Chat {
		load = loadChatRuns
	}
	runs, err := load(o.Runs, o.Limit)
	if err != nil {
		return nil, err
	}
	if o.Gateway {
		if o.Server != "" {
			return nil, usageErrorf("--gateway: the server must be one this command starts: its model is served by this process")
		}
		return runGatewayEval(ctx, o, runs)
	}
	// A new connection per call, as agent_replay.py's urllib makes: its
	// latency figures (p50, p99, growth) are the script's, measured alike.
	rt := &receivedTransport{base: &http.Transport{DisableKeepAlives: true}}
	hc := &http.Client{Transport: rt}
	var cl *evalClient
	if o.Ctxd != "" && o.Server == "" {
		cl, err = connectEvalProcess(ctx, o.Ctxd, hc)
	} else {
		cl, err = connectEval(ctx, o.Server, hc)
	}
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	rep := &agentReport{Options: o, ServerDesc: cl.desc, Runs: len(runs)}
	start := time.Now()
	for k := range runs {
		if err := agentReplay(ctx, cl, rt, &runs[k], o, &rep.Acc); err != nil {
			return nil, err
		}
		if o.Progress != nil && (k+1)%10 == 0 {
			fmt.Fprintf(o.Progress, "... %d/%d runs, %.0fs\n", k+1, len(runs), time.Since(start).Seconds())
		}
	}
	if cl.srv != nil {
		// Measured while the server runs, as the script does: what it keeps
		// on disk as it serves, not after a shutdown's compaction.
		if rep.StoreBytes, err = metrics.DirBytes(cl.srv.dir, 0)(); err != nil {
			return nil, fmt.Errorf("agent eval: data dir: %w", err)
		}
	}
	return rep, nil
}

// agentReplay is the script's replay(): one run, one session. It stores
// the system prompt (pinned) and the task, then before each assistant
// turn asks for a window for the newest input and measures it, and stores
// that turn with the results or messages that follow it.
func agentReplay(ctx context.Context, cl *evalClient, rt *receivedTransport, run *agentRun, o agentOptions, acc *agentAcc) error {
	sid := agentSessionID(run.ID)
	settings, err := o.sessionSettings()
	if err != nil {
		return err
	}
	// Against a --server that replayed this run before, the messages
	// would be stored twice and every figure skewed; the script does not
	// do this, and on its fresh server it changes nothing.
	if err := errNotFoundOK(cl.DeleteSession(ctx, sid)); err != nil {
		return fmt.Errorf("run %s: clear session: %w", run.ID, err)
	}
	if _, err := cl.PutSession(ctx, sid, settings); err != nil {
		return fmt.Errorf("run %s: create session: %w", run.ID, err)
	}
	msgs := run.Messages
	firstAsst := slices.IndexFunc(msgs, func(m agentMessage) bool { return m.Role == "assistant" })
	ids, toks := make([]string, len(msgs)), make([]int, len(msgs))

	needs := newAgentNeeds(msgs, firstAsst)
	contentBytes := 0
	store := func(lo, hi int) error {
		batch := make([]api.MessageIn, 0, hi-lo)
		for j := lo; j < hi; j++ {
			w := api.MessageIn{Role: msgs[j].Role, Content: msgs[j].Content, ToolCallID: msgs[j].ToolCallID}
			if len(msgs[j].calls) > 0 {
				// As recorded: the server reads the same fields.
				if err := json.Unmarshal(msgs[j].ToolCalls, &w.ToolCalls); err != nil {
					return fmt.Errorf("run %s: message %d: tool_calls: %w", run.ID, j, err)
				}
			}
			batch = append(batch, w)
		}
		if lo == 0 && len(batch) > 0 && batch[0].Role == "system" {
			batch[0].Pinned = true
		}
		ans, err := cl.Append(ctx, sid, batch)
		if err != nil {
			return fmt.Errorf("run %s: store messages %d..%d: %w", run.ID, lo, hi-1, err)
		}
		if len(ans.IDs) != len(batch) || len(ans.Tokens) != len(batch) {
			return fmt.Errorf("run %s: stored %d messages, the server answered %d ids and %d token counts",
				run.ID, len(batch), len(ans.IDs), len(ans.Tokens))
		}
		copy(ids[lo:hi], ans.IDs)
		copy(toks[lo:hi], ans.Tokens)
		acc.Writes++
		if float64(ans.Session.Tokens) > agentHardLimit*float64(o.Window) {
			acc.OverHardLimit++
		}
		for j := lo; j < hi; j++ {
			contentBytes += len(msgs[j].text())
		}
		return nil
	}

	if err := store(0, firstAsst); err != nil {
		return err
	}
	var steps []int
	for i, m := range msgs {
		if m.Role == "assistant" {
			steps = append(steps, i)
		}
	}
	var lat []float64
	cache := newAgentCache(msgs, toks, firstAsst, o.Budget)
	probes := agentProbeSteps(steps, firstAsst, o.Probes)
	rng := agentProbeRNG(run.ID)
	for n, i := range steps {
		if probes[i] {
			if j, tok, ok := agentProbeTarget(msgs, firstAsst, i, needs.known, rng); ok {
				if err := agentProbe(ctx, cl, sid, msgs, j, tok, o, acc); err != nil {
					return fmt.Errorf("run %s: before message %d: %w", run.ID, i, err)
				}
			}
		}
		prompt := msgs[i-1].Content
		if utf8.RuneCountInString(prompt) > agentPromptChars {
			prompt = string([]rune(prompt)[:agentPromptChars])
		}
		if prompt == "" {
			prompt = "continue"
		}
		// The latency is the answer received whole, as the script's
		// urlopen().read(). Decoding it into Go types is left out: it
		// costs more than the script's json.loads and grows with the
		// window (the growth read 1.55 with it where the script read 1.42).
		t0 := time.Now()
		w, err := cl.Context(ctx, sid, api.ContextIn{Prompt: prompt, MaxTokens: &o.Budget})
		lat = append(lat, rt.last().Sub(t0).Seconds())
		if err != nil {
			return fmt.Errorf("run %s: context before message %d: %w", run.ID, i, err)
		}
		win := agentWindow(w.Messages)
		acc.Calls++
		if w.Tokens > o.Budget {
			acc.OverBudget++
		}
		agentCheckLatest(win, ids[i-1], msgs[i-1].Content, acc)
		acc.Invalid += agentInvalidPairs(win)
		compact := cache.step(i, w.Messages, acc)

		// What the next turn needs from far back.
		if need := needs.at(i); len(need) > 0 {
			texts := make([]string, len(win))
			for k := range win {
				texts[k] = agentText(win[k].Content, win[k].ToolCalls)
			}
			needs.count(i, need, texts, agentBaseline(msgs, toks, firstAsst, i, o.Budget), compact, acc)
		}
		next := len(msgs)
		if n+1 < len(steps) {
			next = steps[n+1]
		}
		if err := store(i, next); err != nil {
			return err
		}
		needs.note(i, next)
	}

	return agentFinishRun(ctx, cl, run, len(msgs), contentBytes, lat, acc)
}

// agentFinishRun adds a replayed run's session figures, its originals
// and content bytes, and its call latencies (and their growth) to acc.
func agentFinishRun(ctx context.Context, cl *evalClient, run *agentRun, originals, contentBytes int, lat []float64,
	acc *agentAcc) error {
	st, err := cl.Session(ctx, agentSessionID(run.ID))
	if err != nil {
		return fmt.Errorf("run %s: session status: %w", run.ID, err)
	}
	acc.Compactions += st.Compactions
	acc.Summaries += st.Summaries
	acc.Originals += originals
	acc.ContentBytes += contentBytes
	q := max(1, len(lat)/4)
	if len(lat) >= 8 {
		acc.Growth = append(acc.Growth, median(lat[len(lat)-q:])/math.Max(1e-6, median(lat[:q])))
	}
	acc.Lat = append(acc.Lat, lat...)
	return nil
}

// agentCheckLatest counts whether the message being answered (latest, the
// newest stored) is in the window, and whether the first copy of it there
// is whole.
func agentCheckLatest(win []agentWindowMessage, latest, content string, acc *agentAcc) {
	k := slices.IndexFunc(win, func(m agentWindowMessage) bool { return m.ID == latest })
	if k < 0 {
		return
	}
	acc.LatestPresent++
	if win[k].Content == content {
		acc.LatestWhole++
	}
}

// agentInvalidPairs counts the tool results of a window without a call
// before them, and the calls without a result.
func agentInvalidPairs(win []agentWindowMessage) int {
	invalid := 0
	calls, results := map[string]bool{}, map[string]bool{}
	for _, m := range win {
		for _, tc := range m.ToolCalls {
			calls[pyKey(tc.ID)] = true
		}
		if m.Role == "tool" {
			id := pyKey(m.ToolCallID)
			if !calls[id] {
				invalid++
			}
			results[id] = true
		}
	}
	for id := range calls {
		if !results[id] {
			invalid++
		}
	}
	return invalid
}

// agentBaseline is the texts of the baseline's window before message i:
// the system prompt and the task, then the newest messages, newest first,
// while the server's token counts of all of them fit the budget.
func agentBaseline(msgs []agentMessage, toks []int, firstAsst, i, budget int) []string {
	var texts []string
	for j := range firstAsst {
		texts = append(texts, msgs[j].text())
	}
	for _, j := range agentSlide(toks, firstAsst, i, budget) {
		texts = append(texts, msgs[j].text())
	}
	return texts
}

// figures are the script's result, key for key and rounded as it rounds;
// nil where it writes None.
func (r *agentReport) figures() jsonObject {
	a, o := &r.Acc, r.Options
	var storage, growth, p50, p99 any
	if r.StoreBytes > 0 {
		storage = pyRound(pyDiv(float64(r.StoreBytes), float64(a.ContentBytes)), 2)
	}
	if len(a.Growth) > 0 {
		growth = pyRound(median(a.Growth), 2)
	}
	if len(a.Lat) > 0 {
		lat := slices.Clone(a.Lat)
		slices.Sort(lat)
		pct := func(p float64) float64 { return 1000 * lat[min(len(lat)-1, int(p/100*float64(len(lat))))] }
		p50, p99 = pyRound(pct(50), 1), pyRound(pct(99), 1)
	}
	f := jsonObject{
		{"runs", r.Runs}, {"context_calls", a.Calls}, {"writes", a.Writes},
		{"needed_in_window_pct", pyRound(pyDiv(100*float64(a.NeededCtxd), float64(a.Needed)), 1)},
		{"needed_in_window_baseline_pct", pyRound(pyDiv(100*float64(a.NeededBase), float64(a.Needed)), 1)},
		{"needed_tokens", a.Needed},
		{"latest_present_pct", pyRound(pyDiv(100*float64(a.LatestPresent), float64(a.Calls)), 2)},
		{"latest_whole_pct", pyRound(pyDiv(100*float64(a.LatestWhole), float64(a.Calls)), 2)},
		{"over_budget_windows", a.OverBudget}, {"invalid_pairs", a.Invalid},
		{"writes_over_hard_limit", a.OverHardLimit},
		{"compactions_per_100_messages", pyRound(pyDiv(100*float64(a.Compactions), float64(a.Originals)), 1)},
		{"live_summaries_per_original", pyRound(pyDiv(float64(a.Summaries), float64(a.Originals)), 3)},
		{"storage_bytes_per_content_byte", storage},
		{"context_ms_p50", p50}, {"context_ms_p99", p99},
		{"context_latency_growth_median", growth},
		{"window", o.Window}, {"budget", o.Budget},
	}
	if o.Gateway {
		return gatewayFigures(r, f)
	}
	// The script's compact-at-limit beside the baseline, and the cost
	// figures after the window's size.
	k := slices.IndexFunc(f, func(kv jsonField) bool { return kv.Key == "needed_tokens" })
	f = slices.Insert(f, k, jsonField{"needed_in_window_compact_at_limit_pct", pyRound(pyDiv(100*float64(a.NeededCompact), float64(a.Needed)), 1)})
	return append(f, r.cacheFigures()...)
}

// writeText prints the figures as the script does, one "%-34s %s" line
// each, values as Python's str() writes them.
func (r *agentReport) writeText(w io.Writer) error {
	for _, f := range r.figures() {
		if _, err := fmt.Fprintf(w, "%-34s %s\n", f.Key, pyStr(f.Value)); err != nil {
			return err
		}
	}
	return nil
}

func (r *agentReport) writeJSON(w io.Writer) error {
	b, err := json.MarshalIndent(r.figures(), "", " ")
	if err != nil {
		return fmt.Errorf("encode agent report: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// writeJSONFile writes the JSON report to path, as the script's --json.
func (r *agentReport) writeJSONFile(path string) error {
	var b bytes.Buffer
	if err := r.writeJSON(&b); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write agent report: %w", err)
	}
	return nil
}

// receivedTransport reads each answer whole before the client decodes it,
// and notes when it had it: the replay times the server's answer, not
// this client's decoding. The replay's calls are sequential.
type receivedTransport struct {
	base http.RoundTripper
	at   atomic.Int64 // UnixNano of the last answer received whole
}

func (t *receivedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := t.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	t.at.Store(time.Now().UnixNano())
	if err != nil {
		return nil, fmt.Errorf("read the answer to %s %s: %w", r.Method, r.URL, err)
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

// last is when the last answer was received whole.
func (t *receivedTransport) last() time.Time { return time.Unix(0, t.at.Load()) }
