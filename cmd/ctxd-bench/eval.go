package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// evalOptions is what `ctxd-bench eval` is told.
type evalOptions struct {
	Turns           string
	Questions       string
	Out             string
	Ks              []int
	Server          string // empty: an in-process server on loopback
	Mode            string
	SkipAdversarial bool
	// Neighbors is the searches' "neighbors" (the turn after each of the
	// first N hits); -1 leaves it to the server.
	Neighbors int

	// Evidence in window (eval_context.go); off unless Context is set.
	Context      bool
	Window       int // context_window of the ctx- sessions
	Budget       int // max_tokens of each context call and of the baselines
	ContextBatch int // turns per write to the ctx- sessions
	// StoredPrompt stores each question as the ctx- session's newest user
	// message before its context call, and deletes it after: the window
	// a chat client gets for the message it just stored.
	StoredPrompt bool
}

const (
	evalBatch         = 100 // turns per POST
	evalMaxK          = 100 // the API's largest k
	evalSessionPrefix = "eval-"
)

func newEvalCmd() *cobra.Command {
	var o evalOptions
	var ao agentOptions
	var ks string
	var asJSON, noContext, misses bool
	var cpuProfile string
	cmd := &cobra.Command{
		Use: "eval --turns turns.jsonl --questions questions.jsonl --out results.jsonl\n" +
			"  ctxd-bench eval --agent runs.jsonl [--limit N] [--policy JSON] [--out figures.json]",
		Short: "Measure evidence retrieval on a long-conversation benchmark (e.g. LoCoMo), or replay agent runs",
		Long: "Store each conversation of --turns as one session (eval-<conv_id>, replaced if it exists), ask every\n" +
			"question of --questions through POST /v1/search, write the ranked turn ids to --out in the format\n" +
			"bench/score.py reads, and print recall@k, all@k and hit@k per category with score.py's definitions,\n" +
			"plus ingest rate and search latency. Without --server it runs a throwaway server with the default\n" +
			"settings in a temporary data dir; to measure other settings, run `ctxd serve` with them and pass --server.\n\n" +
			"Then, unless --no-context, it measures evidence in window: each conversation is streamed again, a few\n" +
			"turns per write, into a session ctx-<conv_id> whose context_window is --window (so it compacts as it\n" +
			"goes), every question is sent to POST /v1/sessions/ctx-<conv_id>/context with max_tokens --budget, and\n" +
			"the share of its evidence turns present verbatim in the answer is reported per category, next to two\n" +
			"baselines packed into the same budget with the server's exact token accounting: the newest turns\n" +
			"(sliding window) and the best BM25 turns (text-mode search of eval-<conv_id>). It also reports the\n" +
			"compactions, the largest window against the hard limit, whether every turn is still stored as sent,\n" +
			"and context latency.\n\n" +
			"With --agent it replays recorded coding-agent runs instead, as bench/agent_replay.py does and with its\n" +
			"definitions: one session per run (agent-<id>, window --window, default 16000, plus --policy), the system\n" +
			"prompt pinned, and before each assistant turn a context call (the newest input as prompt, max_tokens\n" +
			"--budget, default 12000) whose window is measured against the names that turn uses from more than 6\n" +
			"messages back, beside a baseline of the system prompt, the task and the newest messages that fit the\n" +
			"budget; then the turn and its results are stored. It prints the script's figures (--json: as JSON;\n" +
			"--out: the JSON into a file too). Without --server the data dir's size is measured as well.",
		Example: "  ctxd-bench eval --turns bench/locomo-dev/turns.jsonl --questions bench/locomo-dev/questions.jsonl \\\n" +
			"    --out /tmp/results.jsonl -k 5,10,20 --mode hybrid --window 4096 --budget 2048\n" +
			"  ctxd-bench eval --agent bench/agent-dev/runs.jsonl --limit 8 --policy '{\"target_pct\": 0.3}'",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Cancel on ^C so the temporary data dir is still removed.
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("--cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if ao.Runs != "" {
				return runAgentEvalCmd(ctx, cmd, ao, o, asJSON)
			}
			if err := checkEvalFlags(cmd.Flags()); err != nil {
				return err
			}
			var err error
			if o.Ks, err = parseKs(ks); err != nil {
				return err
			}
			switch o.Mode {
			case "hybrid", "text", "vector":
			default:
				return fmt.Errorf("--mode: %q is not hybrid, text or vector", o.Mode)
			}
			o.Context = !noContext
			if err := o.checkContext(); err != nil {
				return err
			}
			rep, err := runEval(ctx, o)
			if err != nil {
				return err
			}
			if misses && rep.Context != nil {
				rep.Context.writeMisses(cmd.ErrOrStderr())
			}
			if asJSON {
				return rep.writeJSON(cmd.OutOrStdout())
			}
			return rep.writeText(cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Turns, "turns", "", "turns.jsonl: conv_id, session_ts, turn_id, speaker, text, one turn a line")
	f.StringVar(&o.Questions, "questions", "", "questions.jsonl: qid, conv_id, question, category(_name), adversarial, evidence")
	f.StringVar(&o.Out, "out", "", "where to write the ranked turn ids, one {\"qid\", \"retrieved\"} line per question (with --agent: the figures as JSON)")
	f.StringVarP(&ks, "k", "k", "5,10,20", "cut-offs to score, comma-separated; the search asks for the largest (at most 100)")
	f.StringVar(&o.Server, "server", "", "base URL of a running ctxd (e.g. http://127.0.0.1:8080); empty: start one in-process")
	f.StringVar(&o.Mode, "mode", "hybrid", "search mode: hybrid, text or vector")
	f.IntVar(&o.Neighbors, "neighbors", -1, "the searches' neighbors: the turn after each of the first N hits comes along (-1: the server's default)")
	f.BoolVar(&asJSON, "json", false, "print the numbers as JSON instead of tables")
	f.BoolVar(&o.SkipAdversarial, "skip-adversarial", true, "skip adversarial (unanswerable) questions, as score.py does by default")
	f.BoolVar(&noContext, "no-context", false, "skip the evidence-in-window part (ctx- sessions, context endpoint, baselines)")
	f.BoolVar(&misses, "misses", false, "list on stderr each question whose evidence ctxd's window missed, beside what the baselines found")
	f.IntVar(&o.Window, "window", 4096, "context_window of the ctx- sessions, in tokens (with --agent: of each run's session; default 16000 there)")
	f.IntVar(&o.Budget, "budget", 2048, "max_tokens of each context call, and the budget of the baselines (with --agent: default 12000)")
	f.BoolVar(&o.StoredPrompt, "stored-prompt", false, "store each question as the ctx- session's newest user message before its context call (deleted after), as a chat client stores its user's message: the window is then the conversation's cache-stable one")
	f.IntVar(&o.ContextBatch, "context-batch", 2, "turns per write to the ctx- sessions (auto-compaction runs on writes)")
	f.StringVar(&ao.Runs, "agent", "", "replay the recorded agent runs of this JSONL file instead (see above); --turns and --questions do not apply")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the run (client and in-process server) to this file, for go tool pprof")
	f.BoolVar(&ao.Gateway, "gateway", false, "with --agent: replay through the drop-in gateway (POST /v1/chat/completions, the whole history on every call, go-openai as the client) to a model in this process that answers with the recorded turns; figures on what the model was sent")
	f.StringVar(&ao.GatewayAPI, "gateway-api", "", "with --gateway: the API the agent calls, openai (Chat Completions through go-openai, the default) or anthropic (Messages through anthropic-sdk-go, with breakpoints after the system prompt and on the newest message, as Claude Code places them); the model reports its prompt cache by that provider's rules")
	f.BoolVar(&ao.Chat, "chat", false, "with --agent: the file is LoCoMo-style turns (turns.jsonl), each conversation replayed as a chat: the first speaker the user, the other the assistant, a context call before each assistant turn (cached prefix and cost of conversation windows)")
	f.IntVar(&ao.Limit, "limit", 0, "with --agent: replay only the first N runs (0: all)")
	f.IntVar(&ao.Probes, "probes", 0, "with --agent: interrupt each run N times, late in it, with a question about a name or number of a tool output more than 30 messages back, and report prompted_recall_pct (probes add messages: the other figures then differ from a plain run)")
	f.StringVar(&ao.Ctxd, "ctxd", defaultCtxd, "with --agent: the ctxd binary whose `serve` the replay runs as a child process (unless --server); \"\": serve in this process")
	f.StringVar(&ao.Policy, "policy", "", "with --agent: JSON object of session settings PUT with the window, e.g. '{\"target_pct\": 0.3}'")
	return cmd
}

// evalLoCoMoFlags are the flags of the LoCoMo eval, which --agent does not read.
// defaultCtxd is where `make build` puts the ctxd binary.
const defaultCtxd = "bin/ctxd"

var evalLoCoMoFlags = []string{"turns", "questions", "k", "mode", "skip-adversarial", "no-context", "misses", "context-batch", "stored-prompt"}

// checkEvalFlags requires the LoCoMo eval's files (cobra's required flags
// cannot, since --agent needs none of them) and refuses the agent flags.
func checkEvalFlags(fs *pflag.FlagSet) error {
	var missing []string
	for _, name := range []string{"out", "questions", "turns"} {
		if !fs.Changed(name) {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		// cobra's own wording, which the exit code recognises as a usage error
		return fmt.Errorf(`required flag(s) "%s" not set`, strings.Join(missing, `", "`))
	}
	for _, name := range []string{"limit", "policy", "ctxd", "gateway", "gateway-api", "chat"} {
		if fs.Changed(name) {
			return usageErrorf("--%s: only with --agent", name)
		}
	}
	return nil
}

// runAgentEvalCmd is `ctxd-bench eval --agent`: the flags it shares with the
// LoCoMo eval (eo) with the script's window and budget unless given, the
// figures on stdout, the JSON into --out.
func runAgentEvalCmd(ctx context.Context, cmd *cobra.Command, o agentOptions, eo evalOptions, asJSON bool) error {
	fs := cmd.Flags()
	for _, name := range evalLoCoMoFlags {
		if fs.Changed(name) {
			return usageErrorf("--%s: does not apply with --agent", name)
		}
	}
	o.Server, o.Window, o.Budget = eo.Server, agentDefaultWindow, agentDefaultBudget
	if fs.Changed("window") {
		o.Window = eo.Window
	}
	if fs.Changed("budget") {
		o.Budget = eo.Budget
	}
	o.Progress = cmd.ErrOrStderr()
	rep, err := runAgentEval(ctx, o)
	if err != nil {
		return err
	}
	if eo.Out != "" {
		if err := rep.writeJSONFile(eo.Out); err != nil {
			return err
		}
	}
	if asJSON {
		return rep.writeJSON(cmd.OutOrStdout())
	}
	return rep.writeText(cmd.OutOrStdout())
}

func parseKs(s string) ([]int, error) {
	var ks []int
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, err := strconv.Atoi(part)
		if err != nil || k < 1 || k > evalMaxK {
			return nil, fmt.Errorf("-k: %q is not a whole number in 1..%d", part, evalMaxK)
		}
		ks = append(ks, k)
	}
	if len(ks) == 0 {
		return nil, fmt.Errorf("-k: no cut-off in %q", s)
	}
	return ks, nil
}

// evalTurn is one line of turns.jsonl; fields the eval does not use are not decoded.
type evalTurn struct {
	ConvID          string `json:"conv_id"`
	SessionDateTime string `json:"session_date_time"`
	SessionTS       string `json:"session_ts"`
	TurnID          string `json:"turn_id"`
	Speaker         string `json:"speaker"`
	Text            string `json:"text"`
}

// evalQuestion is one line of questions.jsonl. Category and Adversarial stay
// loosely typed because score.py treats them with Python's truthiness and
// str(), and converters differ in what they write there.
type evalQuestion struct {
	QID          json.RawMessage `json:"qid"`
	ConvID       string          `json:"conv_id"`
	Question     string          `json:"question"`
	Category     any             `json:"category"`
	CategoryName string          `json:"category_name"`
	Adversarial  any             `json:"adversarial"`
	Evidence     []string        `json:"evidence"`
}

// categoryKey is score.py's `q.get("category_name") or str(q.get("category"))`.
func (q *evalQuestion) categoryKey() string {
	if q.CategoryName != "" {
		return q.CategoryName
	}
	switch v := q.Category.(type) {
	case nil:
		return "None"
	case json.Number:
		return v.String()
	case string:
		return v
	case bool:
		if v {
			return "True"
		}
		return "False"
	default:
		return fmt.Sprint(v)
	}
}

// adversarial is score.py's `q.get("adversarial") or q.get("category") == 5`.
func (q *evalQuestion) adversarial() bool {
	if truthy(q.Adversarial) {
		return true
	}
	n, ok := q.Category.(json.Number)
	if !ok {
		return false
	}
	f, err := n.Float64()
	return err == nil && f == 5
}

func truthy(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case json.Number:
		f, err := v.Float64()
		return err != nil || f != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// evalConv is one conversation, its turns in file order.
type evalConv struct {
	ID           string
	SessionID    string // recall: eval-<conv>
	CtxSessionID string // evidence in window: ctx-<conv>
	Turns        []evalTurn
	turnIDs      map[string]bool
}

func readJSONL(path string, each func(line int, dec *json.Decoder) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := each(ln, dec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, ln, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// loadTurns groups turns by conversation, keeping the order of first appearance.
func loadTurns(path string) ([]*evalConv, error) {
	var convs []*evalConv
	byID := map[string]*evalConv{}
	bySession := map[string]string{}
	err := readJSONL(path, func(_ int, dec *json.Decoder) error {
		var t evalTurn
		if err := dec.Decode(&t); err != nil {
			return fmt.Errorf("bad turn: %w", err)
		}
		if t.TurnID == "" {
			return errors.New("turn without turn_id: results could not name it")
		}
		c := byID[t.ConvID]
		if c == nil {
			sid := evalSessionID(t.ConvID)
			if other, ok := bySession[sid]; ok {
				return fmt.Errorf("conversations %q and %q both map to session %q", other, t.ConvID, sid)
			}
			bySession[sid] = t.ConvID
			// ctx- is shorter than eval-, so distinct eval- ids give distinct ctx- ids.
			c = &evalConv{ID: t.ConvID, SessionID: sid, CtxSessionID: prefixedSessionID(ctxSessionPrefix, t.ConvID),
				turnIDs: map[string]bool{}}
			byID[t.ConvID] = c
			convs = append(convs, c)
		}
		if c.turnIDs[t.TurnID] {
			return fmt.Errorf("turn_id %q repeats in conversation %q: a result could not say which turn it is", t.TurnID, t.ConvID)
		}
		c.turnIDs[t.TurnID] = true
		c.Turns = append(c.Turns, t)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load turns: %w", err)
	}
	if len(convs) == 0 {
		return nil, fmt.Errorf("load turns: %s has no turns", path)
	}
	return convs, nil
}

func loadQuestions(path string) ([]evalQuestion, error) {
	var qs []evalQuestion
	err := readJSONL(path, func(_ int, dec *json.Decoder) error {
		var q evalQuestion
		if err := dec.Decode(&q); err != nil {
			return fmt.Errorf("bad question: %w", err)
		}
		if len(q.QID) == 0 || string(q.QID) == "null" {
			return errors.New("question without qid")
		}
		qs = append(qs, q)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load questions: %w", err)
	}
	return qs, nil
}

// evalSessionID maps a conversation id onto the API's session id alphabet.
func evalSessionID(conv string) string { return prefixedSessionID(evalSessionPrefix, conv) }

func prefixedSessionID(prefix, conv string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for _, r := range conv {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("._:-", r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > 128 {
		s = s[:128]
	}
	return s
}

// evalCreatedAt turns a turn's session time into RFC 3339. LoCoMo's
// session_ts is a local time without zone ("2023-05-08T13:56:00"); it is
// taken as UTC so that every run stores the same instant.
func evalCreatedAt(t evalTurn) (string, error) {
	if ts := strings.TrimSpace(t.SessionTS); ts != "" {
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04",
			"2006-01-02 15:04:05", "2006-01-02 15:04", "2006-01-02"} {
			if tm, err := time.Parse(layout, ts); err == nil {
				return tm.Format(time.RFC3339), nil
			}
		}
		return "", fmt.Errorf("session_ts %q of turn %s is not an ISO 8601 time", ts, t.TurnID)
	}
	if dt := strings.TrimSpace(t.SessionDateTime); dt != "" {
		// LoCoMo's human form, "1:56 pm on 8 May, 2023".
		for _, layout := range []string{"3:04 pm on 2 January, 2006", "3:04 PM on 2 January, 2006"} {
			if tm, err := time.Parse(layout, dt); err == nil {
				return tm.Format(time.RFC3339), nil
			}
		}
		return "", fmt.Errorf("session_date_time %q of turn %s is not like \"1:56 pm on 8 May, 2023\"", dt, t.TurnID)
	}
	return "", nil // no time: the server stamps it
}

// evalReport is what one run measured.
type evalReport struct {
	Options       evalOptions
	ServerDesc    string
	Conversations int
	Turns         int
	SkippedEmpty  int
	Compactions   int
	IngestTime    time.Duration
	Latencies     []time.Duration
	Scores        *evalScores
	Context       *ctxReport // nil unless Options.Context
}

// runEval ingests the conversations, asks the questions, writes the results
// file and scores it.
func runEval(ctx context.Context, o evalOptions) (_ *evalReport, err error) {
	if o.Mode == "" {
		o.Mode = "hybrid"
	}
	if len(o.Ks) == 0 {
		o.Ks = []int{5, 10, 20}
	}
	convs, err := loadTurns(o.Turns)
	if err != nil {
		return nil, err
	}
	questions, err := loadQuestions(o.Questions)
	if err != nil {
		return nil, err
	}
	byConv := map[string]*evalConv{}
	for _, c := range convs {
		byConv[c.ID] = c
	}
	asked := make([]bool, len(questions))
	for i := range questions {
		q := &questions[i]
		if o.SkipAdversarial && q.adversarial() {
			continue
		}
		if byConv[q.ConvID] == nil {
			return nil, fmt.Errorf("question %s: conversation %q has no turns in %s", q.QID, q.ConvID, o.Turns)
		}
		if strings.TrimSpace(q.Question) == "" {
			return nil, fmt.Errorf("question %s: empty question text", q.QID)
		}
		asked[i] = true
	}

	// Opened before the slow part, so a bad path fails at once.
	out, err := os.Create(o.Out)
	if err != nil {
		return nil, fmt.Errorf("create results file: %w", err)
	}
	defer out.Close()

	rep := &evalReport{Options: o, Conversations: len(convs)}
	cl, err := connectEval(ctx, o.Server, nil)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, cl.close()) }()
	rep.ServerDesc = cl.desc

	for _, c := range convs {
		if err := rep.ingest(ctx, cl, c); err != nil {
			return nil, err
		}
	}

	ranked := make([][]string, len(questions))
	w := bufio.NewWriter(out)
	maxK := slices.Max(o.Ks)
	for i := range questions {
		if !asked[i] {
			continue
		}
		q := &questions[i]
		ids, took, err := searchTurns(ctx, cl, byConv[q.ConvID].SessionID, q.Question, maxK, o.Mode, o.Neighbors)
		if err != nil {
			return nil, fmt.Errorf("question %s: %w", q.QID, err)
		}
		rep.Latencies = append(rep.Latencies, took)
		ranked[i] = ids
		line, err := json.Marshal(struct {
			QID       json.RawMessage `json:"qid"`
			Retrieved []string        `json:"retrieved"`
		}{q.QID, ids})
		if err != nil {
			return nil, fmt.Errorf("question %s: encode result: %w", q.QID, err)
		}
		w.Write(line)
		w.WriteByte('\n')
	}
	if err := w.Flush(); err != nil {
		return nil, fmt.Errorf("write %s: %w", o.Out, err)
	}
	if err := out.Close(); err != nil {
		return nil, fmt.Errorf("write %s: %w", o.Out, err)
	}
	rep.Scores = scoreEval(questions, ranked, asked, o.Ks, !o.SkipAdversarial)
	if o.Context {
		if rep.Context, err = runContextEval(ctx, cl, o, convs, questions, asked); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// ingest replaces the conversation's session with its turns.
func (rep *evalReport) ingest(ctx context.Context, cl *evalClient, c *evalConv) error {
	// A rerun against the same --server must not store every turn twice.
	if err := errNotFoundOK(cl.DeleteSession(ctx, c.SessionID)); err != nil {
		return fmt.Errorf("conversation %s: clear session: %w", c.ID, err)
	}
	if _, err := cl.PutSession(ctx, c.SessionID, nil); err != nil {
		return fmt.Errorf("conversation %s: create session: %w", c.ID, err)
	}
	msgs, skipped, err := evalMessages(c)
	if err != nil {
		return err
	}
	rep.SkippedEmpty += skipped
	for start := 0; start < len(msgs); start += evalBatch {
		batch := msgs[start:min(start+evalBatch, len(msgs))]
		t0 := time.Now()
		ans, err := cl.Append(ctx, c.SessionID, batch)
		if err != nil {
			return fmt.Errorf("conversation %s: store turns %d..%d: %w", c.ID, start, start+len(batch)-1, err)
		}
		rep.IngestTime += time.Since(t0)
		if len(ans.IDs) != len(batch) {
			return fmt.Errorf("conversation %s: stored %d turns, server answered %d ids", c.ID, len(batch), len(ans.IDs))
		}
		if ans.Compaction != nil {
			rep.Compactions++
		}
		rep.Turns += len(batch)
	}
	return nil
}

// evalMessages turns a conversation into messages: the speaker in name, the
// turn id in metadata, the session time as created_at; the first speaker is
// the user, the other(s) the assistant. Empty turns are skipped (the API
// refuses empty content) and counted.
func evalMessages(c *evalConv) (msgs []api.MessageIn, skipped int, _ error) {
	var first string
	for _, t := range c.Turns {
		if strings.TrimSpace(t.Text) == "" {
			skipped++
			continue
		}
		created, err := evalCreatedAt(t)
		if err != nil {
			return nil, 0, fmt.Errorf("conversation %s: %w", c.ID, err)
		}
		if first == "" {
			first = t.Speaker
		}
		role := "assistant"
		if t.Speaker == first {
			role = "user"
		}
		msgs = append(msgs, api.MessageIn{Role: role, Content: t.Text, Name: t.Speaker,
			Metadata: map[string]any{"turn_id": t.TurnID}, CreatedAt: created})
	}
	return msgs, skipped, nil
}

// turnIDOf is the turn id a message carries in its metadata, "" if none.
func turnIDOf(md map[string]any) string {
	switch v := md["turn_id"].(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// searchTurns asks one question and maps the hits to turn ids, best first,
// each once.
func searchTurns(ctx context.Context, cl *evalClient, session, question string, k int, mode string, neighbors int) ([]string, time.Duration, error) {
	in := api.SearchIn{Query: question, SessionID: session, K: k, Mode: mode}
	if neighbors >= 0 {
		in.Neighbors = &neighbors
	}
	t0 := time.Now()
	results, err := cl.Search(ctx, in)
	took := time.Since(t0)
	if err != nil {
		return nil, took, fmt.Errorf("search: %w", err)
	}
	ids := []string{} // never null in the results file
	seen := map[string]bool{}
	for _, r := range results {
		// Summaries carry no turn id; they cannot be scored at turn level.
		id := turnIDOf(r.Metadata)
		if id == "" || r.SessionID != session || seen[id] {
			continue
		}
		seen[id] = true
		ids = append(ids, id)
	}
	return ids, took, nil
}

// evalServer is a throwaway ctxd on a temporary data dir.
type evalServer struct {
	url   string
	main  *server.Main // in-process; or
	child *childServer // a child `ctxd serve`
	dir   string
}

// connectEvalProcess is connectEval with a throwaway server in a child
// process: exe's `serve` on a temporary data dir and a free loopback port.
func connectEvalProcess(ctx context.Context, exe string, hc *http.Client, args ...string) (*evalClient, error) {
	dir, err := os.MkdirTemp("", "ctxd-eval-")
	if err != nil {
		return nil, fmt.Errorf("eval server: temporary data dir: %w", err)
	}
	child, err := startChild(exe, dir, os.Stderr, args...)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("eval server: %w", err)
	}
	srv := &evalServer{url: child.URL, child: child, dir: dir}
	cl, err := newEvalClient(srv.url, hc)
	if err != nil {
		return nil, errors.Join(err, srv.stop())
	}
	cl.desc, cl.srv = "a child `ctxd serve` process (default settings, temporary data dir)", srv
	if err := waitReady(ctx, cl.Client, time.Minute, child.exited); err != nil {
		return nil, fmt.Errorf("eval server: %s serve: %w", exe, errors.Join(err, cl.close()))
	}
	return cl, nil
}

func startEvalServer(ctx context.Context, configure ...func(*server.Config)) (*evalServer, error) {
	dir, err := os.MkdirTemp("", "ctxd-eval-")
	if err != nil {
		return nil, fmt.Errorf("eval server: temporary data dir: %w", err)
	}
	cfg := server.DefaultConfig()
	cfg.DataDir, cfg.LogLevel = dir, "warn"
	for _, f := range configure {
		f(&cfg)
	}
	m, err := server.RunLocal(ctx, cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("eval server: start: %w", err)
	}
	return &evalServer{url: "http://" + m.Addr.String(), main: m, dir: dir}, nil
}

func (s *evalServer) stop() error {
	var err error
	if s.child != nil {
		err = s.child.stop()
	} else {
		err = s.main.Close()
	}
	if rerr := os.RemoveAll(s.dir); rerr != nil {
		err = errors.Join(err, fmt.Errorf("remove %s: %w", s.dir, rerr))
	}
	if err != nil {
		return fmt.Errorf("eval server: stop: %w", err)
	}
	return nil
}

// connectEval is a client of the server at --server, or, when server is
// empty, of a throwaway in-process server, once it is ready. The caller
// closes it, which stops the in-process server. hc sends the requests
// (nil: a client of its own).
func connectEval(ctx context.Context, server string, hc *http.Client, configure ...func(*server.Config)) (*evalClient, error) {
	var srv *evalServer
	desc := strings.TrimRight(server, "/")
	if server == "" {
		var err error
		if srv, err = startEvalServer(ctx, configure...); err != nil {
			return nil, err
		}
		server, desc = srv.url, "in-process (default settings, temporary data dir)"
	}
	cl, err := newEvalClient(server, hc)
	if err != nil {
		if srv != nil {
			err = errors.Join(err, srv.stop())
		}
		return nil, fmt.Errorf("--server: %w", err)
	}
	cl.desc, cl.srv = desc, srv
	if _, err := cl.Ready(ctx); err != nil {
		return nil, fmt.Errorf("server at %s is not ready: %w", cl.BaseURL(), errors.Join(err, cl.close()))
	}
	return cl, nil
}

// evalClient is a client of the API for the eval, with the server it
// started, if any.
type evalClient struct {
	*client.Client
	desc string      // for the report: the URL, or what the throwaway server is
	srv  *evalServer // nil against --server
}

// newEvalClient retries a 429 or 503 five times, the first after 100 ms,
// as the API means them to be (where a retry is safe).
func newEvalClient(base string, hc *http.Client) (*evalClient, error) {
	if hc == nil {
		hc = &http.Client{}
	}
	c, err := client.New(base, client.WithHTTPClient(hc), client.WithTimeout(5*time.Minute),
		client.WithRetries(5, 100*time.Millisecond), client.WithUserAgent("ctxd-eval"))
	if err != nil {
		return nil, err
	}
	return &evalClient{Client: c}, nil
}

// close stops the throwaway server, if any.
func (c *evalClient) close() error {
	if c.srv == nil {
		return nil
	}
	return c.srv.stop()
}

// evalScores are score.py's sums and counts. sums[cat][metric][k index].
type evalScores struct {
	Ks                 []int
	Cats               []string // report order, OVERALL last
	Counts             map[string]int
	Sums               map[string]*[3][]float64
	SkippedAdversarial int
	SkippedNoEvidence  int
	Missing            int
}

var evalMetrics = [3]string{"recall", "all", "hit"}

// scoreEval mirrors score.py at turn level, addition for addition, so that
// the rounded numbers come out identical. ranked[i] belongs to questions[i];
// has[i] says whether it was asked (score.py's "missing" otherwise).
func scoreEval(questions []evalQuestion, ranked [][]string, has []bool, ks []int, includeAdversarial bool) *evalScores {
	s := &evalScores{Ks: ks, Counts: map[string]int{}, Sums: map[string]*[3][]float64{}}
	for i := range questions {
		q := &questions[i]
		cat := q.categoryKey()
		if q.adversarial() && !includeAdversarial {
			s.SkippedAdversarial++
			continue
		}
		gold := map[string]bool{}
		for _, e := range q.Evidence {
			gold[e] = true
		}
		if len(gold) == 0 {
			s.SkippedNoEvidence++
			continue
		}
		if !has[i] {
			s.Missing++
		}
		var list []string
		seen := map[string]bool{}
		for _, t := range ranked[i] {
			t = strings.TrimPrefix(t, q.ConvID+"/")
			if !seen[t] {
				seen[t] = true
				list = append(list, t)
			}
		}
		for _, c := range []string{cat, "OVERALL"} {
			s.Counts[c]++
			sums := s.Sums[c]
			if sums == nil {
				sums = &[3][]float64{make([]float64, len(ks)), make([]float64, len(ks)), make([]float64, len(ks))}
				s.Sums[c] = sums
			}
			for j, k := range ks {
				inter := 0
				for _, t := range list[:min(k, len(list))] {
					if gold[t] {
						inter++
					}
				}
				sums[0][j] += float64(inter) / float64(len(gold))
				if inter == len(gold) {
					sums[1][j] += 1.0
				}
				if inter > 0 {
					sums[2][j] += 1.0
				}
			}
		}
	}
	s.Cats = categoryOrder(s.Counts)
	return s
}

// categoryOrder is score.py's report order of the categories counted: its
// preferred ones, the rest sorted, OVERALL last.
func categoryOrder(counts map[string]int) []string {
	preferred := []string{"single-hop", "multi-hop", "temporal", "open-domain", "adversarial",
		"single-session-user", "single-session-assistant", "single-session-preference",
		"multi-session", "temporal-reasoning", "knowledge-update"}
	var cats, rest []string
	for c := range counts {
		if c != "OVERALL" && !slices.Contains(preferred, c) {
			rest = append(rest, c)
		}
	}
	sort.Strings(rest)
	for _, c := range preferred {
		if counts[c] > 0 {
			cats = append(cats, c)
		}
	}
	return append(append(cats, rest...), "OVERALL")
}

// pct is score.py's round(100.0 * v / n, 2) as text. Both Python's round
// and strconv round the exact binary value half-to-even, so the digits match.
func (s *evalScores) pct(cat string, metric, kIdx int) string {
	n := s.Counts[cat]
	if n == 0 {
		return "0.00"
	}
	return strconv.FormatFloat(100.0*s.Sums[cat][metric][kIdx]/float64(n), 'f', 2, 64)
}

// writeTables prints score.py's output, byte for byte.
func (s *evalScores) writeTables(w io.Writer, questionsPath, resultsPath string) {
	fmt.Fprintf(w, "# turn-level evidence retrieval  (questions=%s results=%s)\n", questionsPath, resultsPath)
	fmt.Fprintf(w, "# scored=%d skipped_adversarial=%d skipped_no_evidence=%d missing_results=%d\n",
		s.Counts["OVERALL"], s.SkippedAdversarial, s.SkippedNoEvidence, s.Missing)
	for m, metric := range evalMetrics {
		header := fmt.Sprintf("%-26s %5s ", metric+"@k (%)", "n")
		for i, k := range s.Ks {
			if i > 0 {
				header += " "
			}
			header += fmt.Sprintf("%7s", "@"+strconv.Itoa(k))
		}
		fmt.Fprintf(w, "\n%s\n%s\n", header, strings.Repeat("-", len(header)))
		for _, c := range s.Cats {
			fmt.Fprintf(w, "%-26s %5d ", c, s.Counts[c])
			for i := range s.Ks {
				if i > 0 {
					fmt.Fprint(w, " ")
				}
				fmt.Fprintf(w, "%7s", s.pct(c, m, i))
			}
			fmt.Fprintln(w)
		}
	}
}

// percentile is the nearest-rank percentile of the latencies.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

func ms(d time.Duration) float64 { return math.Round(float64(d)/1e4) / 100 }

func (rep *evalReport) ingestRate() float64 {
	if rep.IngestTime <= 0 {
		return 0
	}
	return math.Round(float64(rep.Turns)/rep.IngestTime.Seconds()*10) / 10
}

func (rep *evalReport) writeText(w io.Writer) error {
	o := rep.Options
	rep.Scores.writeTables(w, o.Questions, o.Out)
	fmt.Fprintf(w, "\n# ctxd-bench eval: mode=%s server=%s\n", o.Mode, rep.ServerDesc)
	fmt.Fprintf(w, "# ingest: %d conversations, %d turns in %.2fs = %.1f turns/s", rep.Conversations, rep.Turns,
		rep.IngestTime.Seconds(), rep.ingestRate())
	if rep.SkippedEmpty > 0 {
		fmt.Fprintf(w, ", %d empty turns skipped", rep.SkippedEmpty)
	}
	if rep.Compactions > 0 {
		fmt.Fprintf(w, ", %d writes compacted (summarised turns carry no turn id)", rep.Compactions)
	}
	fmt.Fprintf(w, "\n# search: %d queries, k=%d, latency p50 %.2f ms, p99 %.2f ms\n", len(rep.Latencies),
		slices.Max(o.Ks), ms(percentile(rep.Latencies, 0.50)), ms(percentile(rep.Latencies, 0.99)))
	if !o.SkipAdversarial {
		fmt.Fprintln(w, "# adversarial questions included: score with score.py --include-adversarial to compare")
	}
	if rep.Context != nil {
		rep.Context.writeText(w)
	}
	return nil
}

// jsonObject keeps its keys in order, like score.py's OrderedDict.
type jsonObject []jsonField

type jsonField struct {
	Key   string
	Value any
}

func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(f.Key)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// table is score.py's --json "table": per category n, then recall, all and
// hit for each k in that order.
func (s *evalScores) table() jsonObject {
	var t jsonObject
	for _, c := range s.Cats {
		row := jsonObject{{"n", s.Counts[c]}}
		for i, k := range s.Ks {
			for m, metric := range evalMetrics {
				v, _ := strconv.ParseFloat(s.pct(c, m, i), 64)
				row = append(row, jsonField{fmt.Sprintf("%s@%d", metric, k), v})
			}
		}
		t = append(t, jsonField{c, row})
	}
	return t
}

func (rep *evalReport) writeJSON(w io.Writer) error {
	o, s := rep.Options, rep.Scores
	doc := jsonObject{
		{"level", "turn"}, {"k", s.Ks}, {"mode", o.Mode}, {"server", rep.ServerDesc}, {"results", o.Out},
		{"skipped_adversarial", s.SkippedAdversarial}, {"skipped_no_evidence", s.SkippedNoEvidence},
		{"missing_results", s.Missing}, {"table", s.table()},
		{"ingest", jsonObject{{"conversations", rep.Conversations}, {"turns", rep.Turns},
			{"skipped_empty", rep.SkippedEmpty}, {"compactions", rep.Compactions},
			{"seconds", math.Round(rep.IngestTime.Seconds()*1000) / 1000}, {"turns_per_sec", rep.ingestRate()}}},
		{"search", jsonObject{{"queries", len(rep.Latencies)}, {"k", slices.Max(o.Ks)},
			{"p50_ms", ms(percentile(rep.Latencies, 0.50))}, {"p99_ms", ms(percentile(rep.Latencies, 0.99))}}},
	}
	if rep.Context != nil {
		doc = append(doc, jsonField{"context", rep.Context.json()})
	}
	b, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
