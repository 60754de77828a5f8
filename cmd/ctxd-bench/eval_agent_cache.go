package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory"
)

// What a window costs with a prompt cache, and what the agent gets back
// when it asks, as agent_replay.py measures them: the share of each
// window's tokens that repeat the previous call's window exactly from the
// first message (what a provider's cache serves), the cost per call when
// cached tokens cost a tenth, the same for the sliding baseline and for
// compact-at-limit (the whole history until it passes the budget, then the
// newest messages that fit 35% of it: what agents do on their own), and
// with --probes the share of questions about an old tool output whose
// window shows the line asked about.

// The three windows measured each call.
const (
	viewCtxd = iota
	viewBase
	viewCompact
	agentViews
)

// agentView sums one window's tokens and its cached prefix over calls.
type agentView struct{ Tokens, Cached int }

// agentCachedRead is what a cached token costs against an uncached one.
const agentCachedRead = 0.1

// compactKeep is the share of the budget compact-at-limit keeps.
const compactKeep = 0.35

// Probes: questions about outputs more than agentProbeBack messages back.
const agentProbeBack = 30

var agentNumber = regexp.MustCompile(`\b\d{4,}\b`)

// viewMsg is a message of a window as the cache sees it.
type viewMsg struct {
	key    string
	tokens int
}

// agentMsgKey is a message as a provider sees it (the script's msg_key:
// role, content, tool calls, the call answered). Keys are only compared
// within one kind of window.
func agentMsgKey(role, content, callID string, calls []agentToolCall) string {
	var b strings.Builder
	b.WriteString(role + "\x00" + content + "\x00" + callID)
	for _, c := range calls {
		b.WriteString("\x00" + pyKey(c.ID) + "\x01" + c.Function.Name + "\x01" + c.Function.Arguments)
	}
	return b.String()
}

// cachedPrefix is the tokens of cur that repeat prev exactly from the first message.
func cachedPrefix(prev, cur []viewMsg) int {
	n := 0
	for k := 0; k < len(prev) && k < len(cur) && prev[k].key == cur[k].key; k++ {
		n += cur[k].tokens
	}
	return n
}

// agentCache follows one run's three windows from call to call.
type agentCache struct {
	msgs      []agentMessage
	toks      []int
	firstAsst int
	budget    int
	kept      int // compact-at-limit: where its kept history starts
	prev      [agentViews][]viewMsg
	// cached, if set, is what a provider reads of a shared prefix of so
	// many tokens (the gateway eval's OpenAI rule); nil: all of it.
	cached func(shared int) int
}

func newAgentCache(msgs []agentMessage, toks []int, firstAsst, budget int) *agentCache {
	return &agentCache{msgs: msgs, toks: toks, firstAsst: firstAsst, budget: budget, kept: firstAsst}
}

func (c *agentCache) recorded(j int) viewMsg {
	m := c.msgs[j]
	return viewMsg{agentMsgKey(m.Role, m.Content, m.ToolCallID, m.calls), c.toks[j]}
}

// step measures the windows before message i (ctxd's is win) and returns
// compact-at-limit's texts, for needed-in-window.
func (c *agentCache) step(i int, win []api.WindowMessage, acc *agentAcc) []string {
	head := 0
	for _, t := range c.toks[:c.firstAsst] {
		head += t
	}
	sum := head
	for _, t := range c.toks[c.kept:i] {
		sum += t
	}
	if sum > c.budget {
		c.kept = i
		used := head
		for c.kept > c.firstAsst && float64(used+c.toks[c.kept-1]) <= compactKeep*float64(c.budget) {
			c.kept--
			used += c.toks[c.kept]
		}
	}
	var views [agentViews][]viewMsg
	for _, m := range win {
		var calls []agentToolCall
		for _, tc := range m.ToolCalls {
			ac := agentToolCall{ID: &tc.ID}
			ac.Function.Name, ac.Function.Arguments = tc.Function.Name, tc.Function.Arguments
			calls = append(calls, ac)
		}
		views[viewCtxd] = append(views[viewCtxd], viewMsg{agentMsgKey(string(m.Role), m.Content, m.ToolCallID, calls), m.Tokens})
	}
	var compact []string
	for j := range c.firstAsst {
		views[viewBase] = append(views[viewBase], c.recorded(j))
		views[viewCompact] = append(views[viewCompact], c.recorded(j))
		compact = append(compact, c.msgs[j].text())
	}
	slide := agentSlide(c.toks, c.firstAsst, i, c.budget)
	for k := len(slide) - 1; k >= 0; k-- {
		views[viewBase] = append(views[viewBase], c.recorded(slide[k]))
	}
	for j := c.kept; j < i; j++ {
		views[viewCompact] = append(views[viewCompact], c.recorded(j))
		compact = append(compact, c.msgs[j].text())
	}
	for k, v := range views {
		for _, m := range v {
			acc.Views[k].Tokens += m.tokens
		}
		hit := cachedPrefix(c.prev[k], v)
		if c.cached != nil {
			hit = c.cached(hit)
		}
		acc.Views[k].Cached += hit
		c.prev[k] = v
	}
	return compact
}

// agentSlide is the sliding baseline's messages before i, newest first:
// the newest that fit the budget after the system prompt and the task.
func agentSlide(toks []int, firstAsst, i, budget int) []int {
	used := 0
	for _, t := range toks[:firstAsst] {
		used += t
	}
	var out []int
	for j := i - 1; j >= firstAsst; j-- {
		if used+toks[j] > budget {
			break
		}
		used += toks[j]
		out = append(out, j)
	}
	return out
}

// agentProbeSteps is where a run is interrupted by a question: n steps
// spread over those more than 2 x agentProbeBack messages into it.
func agentProbeSteps(steps []int, firstAsst, n int) map[int]bool {
	var late []int
	for _, i := range steps {
		if i > firstAsst+2*agentProbeBack {
			late = append(late, i)
		}
	}
	out := map[int]bool{}
	if len(late) == 0 || n == 0 {
		return out
	}
	for k := range n {
		out[late[len(late)*(k+1)/(n+1)]] = true
	}
	return out
}

// agentProbeTarget is the script's probe_target: a (message, token) from a
// tool output more than agentProbeBack messages before i, the token (a name
// or a number of 4+ digits) in neither the last agentProbeBack messages nor
// the system prompt and the task. The script picks with Python's random
// seeded by the run id; this picks with a PCG seeded by it: the same rule,
// other picks.
func agentProbeTarget(msgs []agentMessage, firstAsst, i int, known map[string]struct{}, rng *rand.Rand) (int, string, bool) {
	var recent []string
	for j := max(0, i-agentProbeBack); j < i; j++ {
		recent = append(recent, msgs[j].text())
	}
	recentText := strings.Join(recent, "\n")
	type cand struct {
		j int
		t string
	}
	var cands []cand
	for j := firstAsst; j < i-agentProbeBack; j++ {
		if msgs[j].Role != "tool" {
			continue
		}
		toks := agentSalient(msgs[j].Content)
		for _, n := range agentNumber.FindAllString(msgs[j].Content, -1) {
			toks[n] = struct{}{}
		}
		var sorted []string
		for t := range toks {
			sorted = append(sorted, t)
		}
		slices.Sort(sorted)
		for _, t := range sorted {
			if _, k := known[t]; !k && !strings.Contains(recentText, t) {
				cands = append(cands, cand{j, t})
			}
		}
	}
	if len(cands) == 0 {
		return 0, "", false
	}
	c := cands[rng.IntN(len(cands))]
	return c.j, c.t, true
}

// agentProbeRNG is a run's generator of probe picks.
func agentProbeRNG(runID string) *rand.Rand {
	h := fnv.New64a()
	h.Write([]byte(runID))
	return rand.New(rand.NewPCG(h.Sum64(), 0))
}

// agentProbe asks the question about token (from message j) as the user
// would, and counts whether the window shows a line of j holding it.
func agentProbe(ctx context.Context, cl *evalClient, sid string, msgs []agentMessage, j int, token string, o agentOptions, acc *agentAcc) error {
	q := fmt.Sprintf("Before the next step: what did the earlier output say about %s? Quote the line.", token)
	if _, err := cl.Append(ctx, sid, []api.MessageIn{{Role: string(memory.RoleUser), Content: q}}); err != nil {
		return fmt.Errorf("store probe: %w", err)
	}
	w, err := cl.Context(ctx, sid, api.ContextIn{Prompt: q, MaxTokens: &o.Budget})
	if err != nil {
		return fmt.Errorf("context for probe: %w", err)
	}
	var texts []string
	for _, m := range agentWindow(w.Messages) {
		texts = append(texts, agentText(m.Content, m.ToolCalls))
	}
	shown := agentNorm(strings.Join(texts, "\n"))
	acc.Probes++
	if slices.ContainsFunc(agentContextLines(msgs[j].Content, token), func(l string) bool { return strings.Contains(shown, l) }) {
		acc.ProbesFound++
	}
	return nil
}

// cacheFigures are the script's figures of the three windows' cost, the
// probes' recall, and ctxd's cost against compact-at-limit's.
func (r *agentReport) cacheFigures() jsonObject {
	a := &r.Acc
	calls := float64(max(1, a.Calls))
	var out jsonObject
	costs := [agentViews]float64{}
	for k, name := range []string{"", "baseline_", "compact_at_limit_"} {
		v := a.Views[k]
		tot, hit := float64(v.Tokens), float64(v.Cached)
		costs[k] = math.RoundToEven((tot - hit + agentCachedRead*hit) / calls)
		out = append(out, jsonObject{
			{name + "window_tokens_per_call", int(math.RoundToEven(tot / calls))},
			{name + "cached_prefix_pct", pyRound(pyDiv(100*hit, tot), 1)},
			{name + "cost_per_call", int(costs[k])},
		}...)
	}
	// A figures run measures the probes in a run of their own (they add
	// messages, which would shift the other figures).
	probed := r
	if r.ProbeRun != nil {
		probed = r.ProbeRun
	}
	if p := &probed.Acc; probed.Options.Probes > 0 {
		out = append(out, jsonObject{{"probes", p.Probes},
			{"prompted_recall_pct", pyRound(pyDiv(100*float64(p.ProbesFound), float64(p.Probes)), 1)}}...)
	}
	return append(out, jsonField{"cost_vs_compact_at_limit", pyRound(costs[viewCtxd]/math.Max(1, costs[viewCompact]), 2)})
}
