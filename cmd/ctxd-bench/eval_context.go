package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/tokenizer"
)

// Evidence in window: is a question's evidence in the window the context
// endpoint builds, when the session's window is far smaller than the
// conversation? Measured against two baselines packed into the same budget
// with the server's own token accounting.

const (
	ctxSessionPrefix = "ctx-"
	ctxEncoding      = "o200k_base" // the server's default encoding; the ctx- sessions are created without one
	ctxListPage      = 1000         // the API's largest page
)

// The three ways of filling a budget that are compared, in report order.
const (
	ctxMethodCtxd = iota
	ctxMethodSliding
	ctxMethodBM25
	ctxMethods
)

var ctxMethodNames = [ctxMethods]string{"ctxd", "sliding", "bm25-pack"}

func (o *evalOptions) checkContext() error {
	if !o.Context {
		return nil
	}
	switch {
	case o.Window < 256 || o.Window > 10_000_000:
		return fmt.Errorf("--window: %d is outside 256..10000000 tokens (the API's range)", o.Window)
	case o.Budget < 1 || o.Budget > 10_000_000:
		return fmt.Errorf("--budget: %d is outside 1..10000000 tokens", o.Budget)
	case o.ContextBatch < 1 || o.ContextBatch > 1000:
		return fmt.Errorf("--context-batch: %d is outside 1..1000", o.ContextBatch)
	}
	return nil
}

// ctxReport is what the evidence-in-window part measured.
type ctxReport struct {
	Window, Budget, Batch int
	StoredPrompt          bool
	Convs                 []*ctxConvStats
	Questions             []ctxQuestion // asked, in file order
	Cats                  []string
	Counts                map[string]int
	Sums                  map[string]*[ctxMethods]float64
	Latencies             []time.Duration
	OverBudget            int            // context answers costing more than max_tokens
	BadMessages           int            // returned turns whose content differs from what was sent
	Sources               map[string]int // where the evidence found in ctxd's windows came from
	Used                  [ctxMethods]int
	// What ctxd's windows were made of: tokens by window source, summaries
	// apart ("recovered+summary": cold summaries recovered), summed over
	// the context calls.
	Composition map[string]int
}

// ctxConvStats is one ctx- session.
type ctxConvStats struct {
	Conv, Session string
	Turns, Writes int
	// Compactions the session status counts after the ingest and at the end
	// (context calls compact after recoveries).
	CompactionsIngest, Compactions int
	CompactionErrors               int
	// The largest window (status tokens) a write answered, the largest a
	// compaction started from, and the hard limit (max_context_pct of the
	// window). OverLimit counts answers (writes and the status after each
	// context call) at or over it.
	MaxTokensWrites, PeakBeforeCompaction, MaxTokensQuestions int
	HardLimit                                                 int
	OverLimit                                                 int
	// Turns stored as sent (an original, kind != summary, with its turn id
	// and content), after the ingest and at the end; evidence turns (of the
	// asked questions) at the end.
	ReachableIngest, ReachableEnd, Evidence, EvidenceReachable int
	States                                                     map[string]int // at the end, originals only
}

// ctxQuestion is one question's result.
type ctxQuestion struct {
	QID      string
	Category string
	Evidence int                  // distinct gold turn ids; 0: not scored
	Found    [ctxMethods][]string // evidence turn ids in each window
	Share    [ctxMethods]float64  // found / evidence
	Used     [ctxMethods]int      // tokens each window costs, prompt and priming included
	Source   map[string]string    // evidence turn id -> ctxd window source
	Recov    []string             // evidence turn ids this context call recovered
	Missing  []string             // evidence turn ids not in ctxd's window, sorted
	Latency  time.Duration
}

// ctxConv is one conversation as the evidence-in-window part sees it.
type ctxConv struct {
	*evalConv
	stats   *ctxConvStats
	sent    map[string]string // turn id -> content as sent
	cost    map[string]int    // turn id -> exact cost as a message
	order   []string          // turn ids sent, oldest first
	byMsgID map[string]string // server message id -> turn id
}

// ctxCounter counts what the server counts.
type ctxCounter struct{ tok *tokenizer.Tokenizer }

func (c ctxCounter) message(role, name, content string) (int, error) {
	return memory.MessageTokens(c.tok, ctxEncoding, &memory.Message{Role: memory.Role(role), Name: name, Content: content})
}

func runContextEval(ctx context.Context, cl *evalClient, o evalOptions, convs []*evalConv, questions []evalQuestion, asked []bool) (*ctxReport, error) {
	tok := tokenizer.New()
	if err := tok.Warm(ctxEncoding); err != nil {
		return nil, err
	}
	counter := ctxCounter{tok}
	r := &ctxReport{Window: o.Window, Budget: o.Budget, Batch: o.ContextBatch, StoredPrompt: o.StoredPrompt, Counts: map[string]int{},
		Sums: map[string]*[ctxMethods]float64{}, Sources: map[string]int{}, Composition: map[string]int{}}
	// The BM25 rankings first, while the index holds the recall sessions
	// but not yet the ctx- sessions, whose turns and growing summaries
	// would shift the collection statistics from one question to the next.
	for _, c := range convs {
		if err := errNotFoundOK(cl.DeleteSession(ctx, c.CtxSessionID)); err != nil {
			return nil, fmt.Errorf("conversation %s: clear session: %w", c.ID, err)
		}
	}
	pos := map[string]map[string]int{} // conversation -> turn id -> place
	for _, c := range convs {
		pos[c.ID] = map[string]int{}
		for i, t := range c.Turns {
			pos[c.ID][t.TurnID] = i
		}
	}
	bm25 := make([][]string, len(questions))
	for i := range questions {
		if asked[i] {
			q := &questions[i]
			var err error
			if bm25[i], err = bm25Ranking(ctx, cl, evalSessionID(q.ConvID), q.Question, pos[q.ConvID]); err != nil {
				return nil, fmt.Errorf("question %s: bm25 baseline: %w", questions[i].QID, err)
			}
		}
	}

	byConv := map[string]*ctxConv{}
	var cs []*ctxConv
	for _, c := range convs {
		cc := &ctxConv{evalConv: c, stats: &ctxConvStats{Conv: c.ID, Session: c.CtxSessionID},
			sent: map[string]string{}, cost: map[string]int{}, byMsgID: map[string]string{}}
		if err := r.ingest(ctx, cl, counter, cc); err != nil {
			return nil, err
		}
		byConv[c.ID] = cc
		cs = append(cs, cc)
		r.Convs = append(r.Convs, cc.stats)
	}
	for i := range questions {
		if !asked[i] {
			continue
		}
		q := &questions[i]
		c := byConv[q.ConvID]
		res, err := r.ask(ctx, cl, counter, c, q, bm25[i])
		if err != nil {
			return nil, fmt.Errorf("question %s: %w", q.QID, err)
		}
		r.Questions = append(r.Questions, res)
	}
	for _, c := range cs {
		evidence := map[string]bool{}
		for i := range questions {
			if asked[i] && questions[i].ConvID == c.ID {
				for _, e := range questions[i].Evidence {
					if c.sent[e] != "" {
						evidence[e] = true
					}
				}
			}
		}
		st, err := r.reachable(ctx, cl, c, evidence)
		if err != nil {
			return nil, err
		}
		c.stats.ReachableEnd = st.turns
		c.stats.Evidence, c.stats.EvidenceReachable = len(evidence), st.evidence
		c.stats.States = st.states
		status, err := ctxStatusOf(ctx, cl, c.CtxSessionID)
		if err != nil {
			return nil, err
		}
		c.stats.Compactions = status.Compactions
	}
	r.Cats = categoryOrder(r.Counts)
	return r, nil
}

func ctxStatusOf(ctx context.Context, cl *evalClient, session string) (*memory.Status, error) {
	st, err := cl.Session(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("session %s: status: %w", session, err)
	}
	return st, nil
}

// hardLimit is the session's max_context_pct of its window, in tokens.
func hardLimit(st *memory.Status) int {
	pct := st.Policy.MaxPct
	if pct <= 0 {
		pct = memory.DefaultPolicy.MaxPct // a server that does not report its policy
	}
	return int(math.Ceil(pct * float64(st.ContextWindow)))
}

// ingest streams the conversation into a fresh ctx- session, a few turns per
// write, as an agent would, and records what the window did.
func (r *ctxReport) ingest(ctx context.Context, cl *evalClient, counter ctxCounter, c *ctxConv) error {
	if err := errNotFoundOK(cl.DeleteSession(ctx, c.CtxSessionID)); err != nil {
		return fmt.Errorf("conversation %s: clear session: %w", c.ID, err)
	}
	st, err := cl.PutSession(ctx, c.CtxSessionID, &api.SessionIn{ContextWindow: &r.Window})
	if err != nil {
		return fmt.Errorf("conversation %s: create session: %w", c.ID, err)
	}
	c.stats.HardLimit = hardLimit(st)
	msgs, _, err := evalMessages(c.evalConv)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		id := turnIDOf(m.Metadata)
		n, err := counter.message(m.Role, m.Name, m.Content)
		if err != nil {
			return err
		}
		c.sent[id], c.cost[id] = m.Content, n
		c.order = append(c.order, id)
	}
	for start := 0; start < len(msgs); start += r.Batch {
		batch := msgs[start:min(start+r.Batch, len(msgs))]
		ans, err := cl.Append(ctx, c.CtxSessionID, batch)
		if err != nil {
			return fmt.Errorf("conversation %s: store turns %d..%d: %w", c.ID, start, start+len(batch)-1, err)
		}
		if len(ans.IDs) != len(batch) {
			return fmt.Errorf("conversation %s: stored %d turns, server answered %d ids", c.ID, len(batch), len(ans.IDs))
		}
		for i, id := range ans.IDs {
			tid := turnIDOf(batch[i].Metadata)
			c.byMsgID[id] = tid
			if i < len(ans.Tokens) && ans.Tokens[i] != c.cost[tid] {
				return fmt.Errorf("conversation %s: turn %s costs %d tokens by the server, %d by the eval: the baselines would not be comparable",
					c.ID, tid, ans.Tokens[i], c.cost[tid])
			}
		}
		c.stats.Writes++
		c.stats.Turns += len(batch)
		c.stats.MaxTokensWrites = max(c.stats.MaxTokensWrites, ans.Session.Tokens)
		if ans.Session.Tokens >= c.stats.HardLimit {
			c.stats.OverLimit++
		}
		if cp := ans.Compaction; cp != nil {
			c.stats.PeakBeforeCompaction = max(c.stats.PeakBeforeCompaction, cp.TokensBefore)
			if cp.Error != "" {
				c.stats.CompactionErrors++
			}
		}
		c.stats.CompactionsIngest = ans.Session.Compactions
	}
	st2, err := r.reachable(ctx, cl, c, nil)
	if err != nil {
		return err
	}
	c.stats.ReachableIngest = st2.turns
	return nil
}

type ctxReach struct {
	turns, evidence int
	states          map[string]int
}

// reachable lists every message of the session (all states) and counts the
// turns still stored as sent: an original (not a summary) with the turn id
// and the content.
func (r *ctxReport) reachable(ctx context.Context, cl *evalClient, c *ctxConv, evidence map[string]bool) (ctxReach, error) {
	out := ctxReach{states: map[string]int{}}
	found := map[string]bool{}
	for m, err := range cl.Messages(ctx, c.CtxSessionID, []string{"all"}, ctxListPage) {
		if err != nil {
			return out, fmt.Errorf("conversation %s: list messages: %w", c.ID, err)
		}
		if m.Kind == memory.KindSummary {
			continue
		}
		out.states[string(m.State)]++
		if id := turnIDOf(m.Metadata); c.sent[id] != "" && c.sent[id] == m.Content {
			found[id] = true
		}
	}
	out.turns = len(found)
	for e := range evidence {
		if found[e] {
			out.evidence++
		}
	}
	return out, nil
}

// ask sends one question to the context endpoint and packs the baselines.
func (r *ctxReport) ask(ctx context.Context, cl *evalClient, counter ctxCounter, c *ctxConv, q *evalQuestion, ranked []string) (_ ctxQuestion, err error) {
	res := ctxQuestion{QID: string(q.QID), Category: q.categoryKey(), Source: map[string]string{}}
	gold := map[string]bool{}
	for _, e := range q.Evidence {
		gold[e] = true
	}
	res.Evidence = len(gold)

	// ctxd.
	if r.StoredPrompt {
		out, err := cl.Append(ctx, c.CtxSessionID, []api.MessageIn{{Role: string(memory.RoleUser), Content: q.Question}})
		if err != nil {
			return res, fmt.Errorf("store the question: %w", err)
		}
		defer func() {
			if derr := cl.DeleteMessage(ctx, out.IDs[0], false); derr != nil && err == nil {
				err = fmt.Errorf("delete the stored question: %w", derr)
			}
		}()
	}
	t0 := time.Now()
	ans, err := cl.Context(ctx, c.CtxSessionID, api.ContextIn{Prompt: q.Question, MaxTokens: &r.Budget})
	res.Latency = time.Since(t0)
	if err != nil {
		return res, fmt.Errorf("context: %w", err)
	}
	r.Latencies = append(r.Latencies, res.Latency)
	if ans.Tokens > r.Budget {
		r.OverBudget++
	}
	res.Used[ctxMethodCtxd] = ans.Tokens
	recovered := map[string]bool{}
	for _, id := range ans.Recovered {
		recovered[id] = true
	}
	var window []string
	for _, m := range ans.Messages {
		part := m.Source
		if m.Kind == memory.KindSummary && m.Source != memory.SourceSummary {
			part += "+summary"
		}
		r.Composition[part] += m.Tokens
		id := turnIDOf(m.Metadata)
		if m.Kind == memory.KindSummary || id == "" {
			continue
		}
		if c.sent[id] != m.Content {
			r.BadMessages++ // a pruned or altered turn is not the evidence as said
			continue
		}
		window = append(window, id)
		if gold[id] {
			res.Source[id] = m.Source
			if recovered[m.ID] {
				res.Recov = append(res.Recov, id)
			}
		}
	}
	res.Found[ctxMethodCtxd] = evidenceIn(window, gold)
	for id := range gold {
		if !slices.Contains(res.Found[ctxMethodCtxd], id) {
			res.Missing = append(res.Missing, id)
		}
	}
	slices.Sort(res.Missing)

	// The window after the call (a call may recover and compact).
	st, err := ctxStatusOf(ctx, cl, c.CtxSessionID)
	if err != nil {
		return res, err
	}
	c.stats.MaxTokensQuestions = max(c.stats.MaxTokensQuestions, st.Tokens)
	if st.Tokens >= c.stats.HardLimit {
		c.stats.OverLimit++
	}

	// The baselines: the server's accounting, budget = max_tokens minus the
	// prompt as a user message and the reply priming.
	promptCost, err := counter.message(string(memory.RoleUser), "", q.Question)
	if err != nil {
		return res, err
	}
	base := promptCost + memory.ReplyPriming
	avail := r.Budget - base

	// Sliding window: the newest turns, while they fit.
	window, used := nil, 0
	for i := len(c.order) - 1; i >= 0; i-- {
		id := c.order[i]
		if used+c.cost[id] > avail {
			break
		}
		used += c.cost[id]
		window = append(window, id)
	}
	res.Found[ctxMethodSliding], res.Used[ctxMethodSliding] = evidenceIn(window, gold), base+used

	// BM25 packing: the best text-mode hits of the recall session, each
	// that still fits.
	window, used = nil, 0
	for _, id := range ranked {
		n, ok := c.cost[id]
		if !ok || used+n > avail {
			continue
		}
		used += n
		window = append(window, id)
	}
	res.Found[ctxMethodBM25], res.Used[ctxMethodBM25] = evidenceIn(window, gold), base+used

	if res.Evidence == 0 {
		return res, nil // score.py skips it: nothing to find
	}
	for m := range ctxMethods {
		res.Share[m] = float64(len(res.Found[m])) / float64(res.Evidence)
		r.Used[m] += res.Used[m]
	}
	for _, src := range res.Source {
		r.Sources[src]++
	}
	for _, cat := range []string{res.Category, "OVERALL"} {
		r.Counts[cat]++
		s := r.Sums[cat]
		if s == nil {
			s = &[ctxMethods]float64{}
			r.Sums[cat] = s
		}
		for m := range ctxMethods {
			s[m] += res.Share[m]
		}
	}
	return res, nil
}

// bm25Ranking is the recall session's text-mode (BM25) ranking of its turns
// for the question, best first; equal scores in conversation order, so that
// which turns fill the last tokens of the budget does not depend on ids.
func bm25Ranking(ctx context.Context, cl *evalClient, session, question string, pos map[string]int) ([]string, error) {
	results, err := cl.Search(ctx, api.SearchIn{Query: question, SessionID: session, K: evalMaxK, Mode: "text"})
	if err != nil {
		return nil, fmt.Errorf("search: %w", err)
	}
	type hit struct {
		id    string
		score float64
	}
	var hits []hit
	seen := map[string]bool{}
	for _, h := range results {
		id := turnIDOf(h.Metadata)
		if id == "" || h.SessionID != session || seen[id] {
			continue
		}
		seen[id] = true
		hits = append(hits, hit{id, h.Score})
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		return cmp.Compare(pos[a.id], pos[b.id])
	})
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.id
	}
	return ids, nil
}

// evidenceIn is the gold turn ids present in window, in window order, once.
func evidenceIn(window []string, gold map[string]bool) []string {
	found := []string{}
	for _, id := range window {
		if gold[id] && !slices.Contains(found, id) {
			found = append(found, id)
		}
	}
	return found
}

// pct is the category's mean share as a percentage, rounded as score.py does.
func (r *ctxReport) pct(cat string, m int) float64 {
	n := r.Counts[cat]
	if n == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(strconv.FormatFloat(100*r.Sums[cat][m]/float64(n), 'f', 2, 64), 64)
	return v
}

func (r *ctxReport) meanUsed(m int) float64 {
	n := r.Counts["OVERALL"]
	if n == 0 {
		return 0
	}
	return math.Round(float64(r.Used[m])/float64(n)*10) / 10
}

func (r *ctxReport) evidenceRecovered() int {
	n := 0
	for _, q := range r.Questions {
		if q.Evidence > 0 {
			n += len(q.Recov)
		}
	}
	return n
}

// writeMisses lists the questions whose evidence ctxd's window missed: the
// place to start when a category falls behind a baseline.
func (r *ctxReport) writeMisses(w io.Writer) {
	for _, q := range r.Questions {
		if len(q.Missing) == 0 {
			continue
		}
		fmt.Fprintf(w, "miss q%s %s: missing %s;", q.QID, q.Category, strings.Join(q.Missing, " "))
		for m := range ctxMethods {
			fmt.Fprintf(w, " %s %d/%d", ctxMethodNames[m], len(q.Found[m]), q.Evidence)
		}
		fmt.Fprintln(w)
	}
}

func (r *ctxReport) writeText(w io.Writer) {
	fmt.Fprintf(w, "\n# evidence in window (%%): share of a question's evidence turns present verbatim in the window\n")
	fmt.Fprintf(w, "# window %d tokens (ctx- sessions, %d turns per write), budget %d tokens per question (exact, %s)\n",
		r.Window, r.Batch, r.Budget, ctxEncoding)
	header := fmt.Sprintf("%-26s %5s %9s %9s %9s", "category", "n", ctxMethodNames[0], ctxMethodNames[1], ctxMethodNames[2])
	fmt.Fprintf(w, "%s\n%s\n", header, strings.Repeat("-", len(header)))
	for _, c := range r.Cats {
		fmt.Fprintf(w, "%-26s %5d", c, r.Counts[c])
		for m := range ctxMethods {
			fmt.Fprintf(w, " %9.2f", r.pct(c, m))
		}
		fmt.Fprintln(w)
	}
	for _, s := range r.Convs {
		fmt.Fprintf(w, "# %s: %d turns in %d writes; compactions %d (%d during ingest)", s.Session, s.Turns, s.Writes,
			s.Compactions, s.CompactionsIngest)
		if s.CompactionErrors > 0 {
			fmt.Fprintf(w, ", %d FAILED", s.CompactionErrors)
		}
		fmt.Fprintf(w, "; max window %d tokens in write answers, %d after context calls, hard limit %d (peak before a compaction %d)",
			s.MaxTokensWrites, s.MaxTokensQuestions, s.HardLimit, s.PeakBeforeCompaction)
		if s.OverLimit > 0 {
			fmt.Fprintf(w, ", %d answers AT OR OVER the hard limit", s.OverLimit)
		}
		fmt.Fprintf(w, "; reachable %s after ingest, %s at the end (evidence %s)\n",
			ratio(s.ReachableIngest, s.Turns), ratio(s.ReachableEnd, s.Turns), ratio(s.EvidenceReachable, s.Evidence))
	}
	fmt.Fprintf(w, "# context: %d calls, latency p50 %.2f ms, p99 %.2f ms; %d answers over budget; mean tokens used: ctxd %.1f, sliding %.1f, bm25-pack %.1f\n",
		len(r.Latencies), ms(percentile(r.Latencies, 0.50)), ms(percentile(r.Latencies, 0.99)), r.OverBudget,
		r.meanUsed(ctxMethodCtxd), r.meanUsed(ctxMethodSliding), r.meanUsed(ctxMethodBM25))
	fmt.Fprintf(w, "# ctxd window, mean tokens by source: %s\n", r.compositionText())
	fmt.Fprintf(w, "# ctxd evidence in window by source: %s; recovered by the call itself: %d", sourcesText(r.Sources), r.evidenceRecovered())
	if r.BadMessages > 0 {
		fmt.Fprintf(w, "; %d returned turns NOT as sent (not counted)", r.BadMessages)
	}
	fmt.Fprintln(w)
}

func (r *ctxReport) meanComposition() jsonObject {
	var out jsonObject
	parts := slices.Sorted(maps.Keys(r.Composition))
	for _, k := range parts {
		out = append(out, jsonField{k, math.Round(float64(r.Composition[k])/float64(max(1, len(r.Latencies)))*10) / 10})
	}
	return out
}

func (r *ctxReport) compositionText() string {
	var parts []string
	for _, f := range r.meanComposition() {
		parts = append(parts, fmt.Sprintf("%s %.1f", f.Key, f.Value))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func ratio(n, of int) string {
	if of == 0 {
		return "0/0"
	}
	return fmt.Sprintf("%d/%d (%.2f%%)", n, of, 100*float64(n)/float64(of))
}

func sourcesText(s map[string]int) string {
	var parts []string
	for _, k := range []string{memory.SourceRecent, memory.SourceWorking, memory.SourceRecovered, memory.SourcePinned} {
		if s[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, s[k]))
		}
	}
	for k, v := range s {
		if !slices.Contains([]string{memory.SourceRecent, memory.SourceWorking, memory.SourceRecovered, memory.SourcePinned}, k) {
			parts = append(parts, fmt.Sprintf("%s %d", k, v))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (r *ctxReport) json() jsonObject {
	var table jsonObject
	for _, c := range r.Cats {
		row := jsonObject{{"n", r.Counts[c]}}
		for m := range ctxMethods {
			row = append(row, jsonField{ctxMethodNames[m], r.pct(c, m)})
		}
		table = append(table, jsonField{c, row})
	}
	var convs []jsonObject
	for _, s := range r.Convs {
		convs = append(convs, jsonObject{{"conv_id", s.Conv}, {"session", s.Session}, {"turns", s.Turns}, {"writes", s.Writes},
			{"compactions", s.Compactions}, {"compactions_ingest", s.CompactionsIngest}, {"compaction_errors", s.CompactionErrors},
			{"max_tokens_writes", s.MaxTokensWrites}, {"max_tokens_questions", s.MaxTokensQuestions},
			{"peak_before_compaction", s.PeakBeforeCompaction}, {"hard_limit", s.HardLimit}, {"over_limit", s.OverLimit},
			{"reachable_ingest", s.ReachableIngest}, {"reachable_end", s.ReachableEnd},
			{"reachable_pct", pctOf(min(s.ReachableIngest, s.ReachableEnd), s.Turns)},
			{"evidence", s.Evidence}, {"evidence_reachable", s.EvidenceReachable}, {"states_end", s.States}})
	}
	var qs []jsonObject
	for _, q := range r.Questions {
		row := jsonObject{{"qid", jsonRaw(q.QID)}, {"category", q.Category}, {"evidence", q.Evidence}}
		for m := range ctxMethods {
			row = append(row, jsonField{ctxMethodNames[m], jsonObject{{"found", q.Found[m]}, {"tokens", q.Used[m]}}})
		}
		row = append(row, jsonField{"sources", q.Source}, jsonField{"recovered", nonNil(q.Recov)},
			jsonField{"latency_ms", ms(q.Latency)})
		qs = append(qs, row)
	}
	return jsonObject{
		{"window", r.Window}, {"budget", r.Budget}, {"turns_per_write", r.Batch}, {"encoding", ctxEncoding},
		{"table", table}, {"sessions", convs},
		{"calls", len(r.Latencies)}, {"p50_ms", ms(percentile(r.Latencies, 0.50))}, {"p99_ms", ms(percentile(r.Latencies, 0.99))},
		{"over_budget", r.OverBudget}, {"altered_turns", r.BadMessages},
		{"mean_tokens", jsonObject{{ctxMethodNames[0], r.meanUsed(0)}, {ctxMethodNames[1], r.meanUsed(1)}, {ctxMethodNames[2], r.meanUsed(2)}}},
		{"window_tokens_by_source", r.meanComposition()}, {"evidence_sources", r.Sources}, {"evidence_recovered", r.evidenceRecovered()},
		{"questions", qs},
	}
}

func pctOf(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(10000*float64(n)/float64(of)) / 100
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// jsonRaw keeps a qid as the questions file wrote it (a number or a string).
type jsonRaw string

func (j jsonRaw) MarshalJSON() ([]byte, error) { return []byte(j), nil }
