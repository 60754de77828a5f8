package memory

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// The window of an agent in a tool loop (a coding agent reading files,
// running commands, editing) is built differently from a conversation's:
// its next step needs the turn it is answering whole, then the newest
// steps verbatim, then the names (files, identifiers) that earlier outputs
// showed. Recorded coding-agent runs (71, window 16,000, budget 12,000)
// put the gap in numbers: a plain "system + task + newest that fit" window
// showed 77.5% of the names the next step reused from far back, ctxd's
// relevance-ranked window 68%; relevance ranking spent the budget on
// recovered history and pruned the recent outputs the agent was working
// from.

// Loop window limits.
const (
	// loopReach is how many of the newest messages the tail and the digest
	// read at most: the cost of a call stays flat however long the session
	// grows (a 12,000-token budget holds ~50 steps of a coding agent).
	loopReach = 384
	// loopToolWindow: a session whose newest loopToolWindow messages hold a
	// tool call or result is in a tool loop.
	loopToolWindow = 8
)

// Shares of the loop window's budget (after pinned messages, the current
// turn and the task): the digest of older outputs' named lines, and
// verbatim recoveries for the prompt; the tail of newest steps gets the rest
// first, and what the digest or recoveries leave flows back to it.
var (
	LoopDigestShare    = 0.2
	LoopRecoveredShare = 0.0
)

// inToolLoop reports whether the session's newest messages are an agent's
// tool loop.
func (b *windowBuilder) inToolLoop() bool {
	n := 0
	for i := len(b.units) - 1; i >= 0 && n < loopToolWindow; i-- {
		for _, m := range b.units[i].msgs {
			if m.Role == RoleTool || len(m.ToolCalls) > 0 {
				return true
			}
			n++
		}
	}
	return false
}

// msgView is how one message shows in the window, when not as the prune
// schedule says: whole, or cut to fit.
type msgView struct {
	content string
	tokens  int
	level   int
}

// buildLoop builds a tool loop's window: pinned messages, the current turn
// (cut to fit if it must be), the task, the newest steps verbatim (active or
// cold alike: the budget is the caller's, whatever the working window
// holds), the session's summary, and a digest of the named lines of older
// outputs.
func (b *windowBuilder) buildLoop(ctx context.Context) (*ContextResult, error) {
	sess := b.sess
	after := uint64(0)
	if sess.LastSeq > loopReach {
		after = sess.LastSeq - loopReach
	}
	recent, err := b.s.Store.Messages(ctx, sess.Tenant, sess.ID, MessageQuery{AfterSeq: after})
	if err != nil {
		return nil, err
	}
	shown := map[string]bool{}
	for u := range b.chosen {
		for _, m := range u.msgs {
			shown[m.ID] = true
		}
	}
	var originals []*Message
	for _, m := range recent {
		// A superseded message is not history any more: the client replaced it.
		if !m.IsSummary() && !m.IsSuperseded() {
			originals = append(originals, m)
		}
	}
	b.indexOriginals(originals)
	if e := b.prev; e != nil {
		ok, err := b.extend(ctx, e.layout, originals)
		if err != nil || ok {
			return b.res, err
		}
	}
	tail := groupUnits(originals, b.fullCost)
	// The current turn: the newest unit, whole or cut, never left out.
	var current *unit
	for i := len(tail) - 1; i >= 0; i-- {
		if !shown[tail[i].msgs[0].ID] {
			current = tail[i]
			tail = tail[:i]
			break
		}
	}
	if current != nil {
		if err := b.takeCurrent(current); err != nil {
			return nil, err
		}
		for _, m := range current.msgs {
			shown[m.ID] = true
		}
	}
	// The task: the first user message, as compaction protects it.
	for _, u := range b.units {
		if _, done := b.chosen[u]; done || u.msgs[0].IsSummary() {
			continue
		}
		if u.msgs[0].Role == RoleUser {
			if u.tokens <= b.avail && !shown[u.msgs[0].ID] {
				b.chosen[u] = SourceWorking
				b.use(SourceWorking, u.tokens)
				for _, m := range u.msgs {
					shown[m.ID] = true
				}
			}
			break
		}
	}
	oldest := uint64(0)
	if current != nil {
		oldest = current.msgs[0].Seq
	}
	// A user who interrupts the loop asks about what its last step showed:
	// that step comes whole whatever the fill below.
	if n := len(tail); n > 0 && current != nil && current.msgs[0].Role == RoleUser && !shown[tail[n-1].msgs[0].ID] &&
		tail[n-1].complete() && tail[n-1].tokens <= b.avail {
		b.takeTail(tail[n-1:], shown, b.avail, &oldest)
	}
	rest := b.avail
	// Built afresh, the window fills LoopFillPct of the budget: the rest is
	// held back, room for the calls that follow to append to it.
	// A large current turn does not starve the digest and the tail: they
	// keep at least LoopKeepShare of what the turn left.
	hold := max(0, min(b.avail-int(LoopKeepShare*float64(rest)), b.req.MaxTokens-max(int(LoopFillPct*float64(b.req.MaxTokens)), b.req.MaxTokens-b.avail)))
	b.avail -= hold
	reserve := min(b.avail, int(LoopDigestShare*float64(rest))+int(LoopRecoveredShare*float64(rest)))
	// The tail, newest first, while it leaves the reserve; then the
	// summary; then recoveries and the digest; then the tail again with
	// what they left.
	next := b.takeTail(tail, shown, b.avail-reserve, &oldest)
	for _, u := range b.units {
		if _, done := b.chosen[u]; !done && u.msgs[0].IsSummary() && u.tokens <= b.avail {
			b.chosen[u] = SourceSummary
			b.use(SourceSummary, u.tokens)
		}
	}
	if LoopRecoveredShare > 0 {
		if err := b.embedPrompt(ctx); err != nil {
			return nil, err
		}
		if err := b.findRecoverable(ctx); err != nil {
			return nil, err
		}
		var fresh []*unit
		for _, u := range b.recover {
			if !shown[u.msgs[0].ID] {
				fresh = append(fresh, u)
			}
		}
		b.recover = fresh
		b.takeRecovered(int(LoopRecoveredShare * float64(rest)))
		for _, u := range b.recover {
			if b.chosen[u] == SourceRecovered {
				for _, m := range u.msgs {
					shown[m.ID] = true
				}
			}
		}
	}
	if err := b.takeDigest(ctx, originals, shown, oldest, int(LoopDigestShare*float64(rest))); err != nil {
		return nil, err
	}
	b.takeTail(tail[:next], shown, b.avail, &oldest)
	b.avail += hold
	b.answerOnly()
	res := b.assemble()
	if current == nil {
		return res, nil
	}
	cur := slices.IndexFunc(res.Messages, func(wm WindowMessage) bool { return wm.ID == current.msgs[0].ID })
	if err := b.addRecall(ctx, originals, cur); err != nil {
		return nil, err
	}
	b.layout = b.freeze(res.Messages, current.msgs[0].ID, originals[len(originals)-1].Seq)
	b.finishTokens()
	return res, nil
}

// fullCost is what m costs shown whole (or cut, when it was too large for
// its place when stored).
func (b *windowBuilder) fullCost(m *Message) int {
	if m.Prune != nil && m.Prune.Cut > 0 {
		return m.Prune.Cut
	}
	return m.Tokens
}

// takeCurrent adds the turn the agent is answering: whole if it fits, else
// with its messages (tool results, and text too large for its place) cut
// head + tail to share what is left. If even that
// cannot fit, no window can be built (409, saying what would).
func (b *windowBuilder) takeCurrent(u *unit) error {
	for _, m := range u.msgs {
		b.views[m.ID] = msgView{content: b.pol.prunedContent(m, b.fullLevel(m)), tokens: b.fullCost(m), level: b.fullLevel(m)}
	}
	if u.tokens <= b.avail {
		b.chosen[u] = SourceRecent
		b.use(SourceRecent, u.tokens)
		return nil
	}
	fixed := 0
	var results []*Message // what may be cut: contents, not tool calls or pinned text
	for _, m := range u.msgs {
		if m.Content != "" && !m.Pinned && m.Role != RoleSystem {
			results = append(results, m)
		} else {
			fixed += b.views[m.ID].tokens
		}
	}
	if fixed > b.avail {
		return Errorf(ECONFLICT, "the message being answered (%s) needs %d tokens, but max_tokens %d leaves %d after pinned messages and the prompt: raise max_tokens to at least %d",
			u.msgs[0].ID, fixed, b.req.MaxTokens, b.avail, b.req.MaxTokens-b.avail+fixed)
	}
	left := b.avail - fixed
	total := fixed
	for i, m := range results {
		share := left / (len(results) - i)
		head, tail, cost, ok, err := cutToFit(b.s.Tokenizer, b.sess.Encoding, m, share)
		if err != nil {
			return err
		}
		if !ok {
			return Errorf(ECONFLICT, "the turn being answered (message %s and its %d tool results) needs %d tokens cut to the least, but max_tokens %d leaves %d after pinned messages and the prompt: raise max_tokens to at least %d",
				u.msgs[0].ID, len(results), fixed+len(results)*cost, b.req.MaxTokens, b.avail, b.req.MaxTokens-b.avail+fixed+len(results)*cost)
		}
		b.views[m.ID] = msgView{content: cutContent(m, head, tail), tokens: cost, level: PruneCut}
		left -= cost
		total += cost
	}
	u.tokens = total
	b.chosen[u] = SourceRecent
	b.use(SourceRecent, total)
	return nil
}

// fullLevel is the level at which m shows whole: cut if it was too large for
// its place.
func (b *windowBuilder) fullLevel(m *Message) int {
	if m.Prune != nil && m.Prune.Cut > 0 {
		return PruneCut
	}
	return PruneNone
}

// takeTail adds tail units newest first (tail[:from] is what is left to
// take) while they fit in limit, and stops at the first that does not: an
// older step must not jump over a newer one. It returns how many of tail
// are left, and lowers oldest to the first seq taken.
func (b *windowBuilder) takeTail(tail []*unit, shown map[string]bool, limit int, oldest *uint64) int {
	used := 0
	i := len(tail) - 1
	for ; i >= 0; i-- {
		u := tail[i]
		if shown[u.msgs[0].ID] {
			continue
		}
		if !u.complete() {
			continue // half a tool group cannot be sent
		}
		if u.tokens > b.avail || used+u.tokens > limit {
			break
		}
		for _, m := range u.msgs {
			shown[m.ID] = true
			b.views[m.ID] = msgView{content: b.pol.prunedContent(m, b.fullLevel(m)), tokens: b.fullCost(m), level: b.fullLevel(m)}
		}
		b.chosen[u] = SourceRecent
		b.use(SourceRecent, u.tokens)
		used += u.tokens
		*oldest = u.msgs[0].Seq
	}
	return i + 1
}

// maxDigestCommand bounds the command shown above an output's lines.
const maxDigestCommand = 48

// digestHeader opens the digest message.
const digestHeader = "[ctxd: earlier tool output, one line for each file and identifier it named that the newest steps do not show; the whole outputs are the ids in sources, GET /v1/messages/{id}]"

// takeDigest adds one message holding, for each name (file path or code
// identifier) that older tool outputs showed and the window does not, one
// line that holds it: names the agent itself wrote first (in its calls and
// replies: what it has been working with), newest first within each group,
// the line from the newest output that has it, within limit tokens.
//
// Offline on the 71 recorded runs (budget 12,000), for the share of names
// the next step reused from far back shown in context: every named line of
// older outputs, newest first, 93.4 at 1,500 tokens; one line a name 94.4;
// one line a name with the agent's names first 99.6, using ~1,000 tokens.
// Headers naming each output cost a point or two and were left out (the
// ids are in the message's sources).
func (b *windowBuilder) takeDigest(ctx context.Context, originals []*Message, shown map[string]bool, oldest uint64, limit int) error {
	limit = min(limit, b.avail)
	if limit <= 0 || oldest == 0 {
		return nil
	}
	cache := &b.s.salient
	covered := map[uint64]bool{} // names a message in the window shows already
	agent := map[uint64]bool{}   // names the agent wrote
	mark := func(set map[uint64]bool, n *named) {
		for _, x := range n.uniq {
			set[x.h] = true
		}
	}
	for u := range b.chosen {
		for _, m := range u.msgs {
			if m.Role == RoleSystem || m.Role == RoleUser {
				mark(covered, cache.get(m.ID, 0, m.Content))
			}
		}
	}
	calls := map[string]*ToolCall{} // tool call id -> the call, to head the lines of its output
	var outputs []*Message          // older outputs the window does not show, newest first
	for _, m := range originals {
		for k := range m.ToolCalls {
			calls[m.ToolCalls[k].ID] = &m.ToolCalls[k]
		}
		switch {
		case m.Role == RoleTool && shown[m.ID]:
			mark(covered, cache.get(m.ID, 0, m.Content))
		case m.Role == RoleAssistant:
			mark(agent, cache.get(m.ID, 0, m.Content))
			for k, tc := range m.ToolCalls {
				mark(agent, cache.get(m.ID, k+1, tc.Function.Arguments))
			}
		}
	}
	for i := len(originals) - 1; i >= 0; i-- {
		if m := originals[i]; m.Seq < oldest && !shown[m.ID] && m.Role == RoleTool {
			outputs = append(outputs, m)
		}
	}
	d := &Message{ID: "digest", Role: RoleUser, Kind: KindDigest, State: StateActive, SessionID: b.sess.ID, Anchor: oldest}
	base, err := MessageTokens(b.s.Tokenizer, b.sess.Encoding, d) // all but the content
	if err != nil {
		return err
	}
	est, err := b.s.counts.count(b.s.Tokenizer, b.sess.Encoding, digestHeader+"\n")
	if err != nil {
		return fmt.Errorf("count the digest header: %w", err)
	}
	est += base
	// Each name once, with the line of the newest output that has it:
	// names the agent wrote first, then the others. Each line is weighed by
	// its own exact count (see digestCost), and each output's header too.
	type choice struct {
		src   *Message
		n     *named
		head  string
		lines []int
	}
	var chosen []*choice
	bySrc := map[*Message]*choice{}
	heads := map[*Message]int{} // an output's header's tokens
	seen := map[uint64]bool{}   // a name met: its newest line was weighed
	lines := map[string]bool{}  // lines chosen (outputs repeat lines)
	misses := 0
	// A full digest stops the search: once this many lines in a row did
	// not fit (or no line can), the rest would not either.
	const maxMisses = 64
choose:
	for pass := 0; pass < 2; pass++ {
		for _, m := range outputs {
			n := cache.get(m.ID, 0, m.Content)
			for _, x := range n.uniq {
				if agent[x.h] != (pass == 0) || seen[x.h] || covered[x.h] {
					continue
				}
				seen[x.h] = true
				if lines[n.lines[x.line]] {
					continue
				}
				cost, err := n.lineTokens(b.s.Tokenizer, b.sess.Encoding, x.line)
				if err != nil {
					return err
				}
				c := bySrc[m]
				if c == nil {
					hc, ok := heads[m]
					if !ok {
						if hc, err = b.s.counts.count(b.s.Tokenizer, b.sess.Encoding, digestHead(calls[m.ToolCallID])+"\n"); err != nil {
							return fmt.Errorf("count a digest header: %w", err)
						}
						heads[m] = hc
					}
					cost += hc
				}
				if est+cost > limit {
					if misses++; misses >= maxMisses || limit-est < 3 {
						break choose
					}
					continue
				}
				misses = 0
				if c == nil {
					c = &choice{src: m, n: n, head: digestHead(calls[m.ToolCallID])}
					bySrc[m] = c
					chosen = append(chosen, c)
				}
				c.lines = append(c.lines, x.line)
				lines[n.lines[x.line]] = true
				for _, h := range n.hashes[x.line] {
					covered[h] = true // one line shows all its names
				}
				est += cost
			}
		}
	}
	// Rendered by output, newest first, each under the command that made it
	// (a line of a file view means little without the file), its lines in
	// their own order. Offline, the headers cost a point of needed names at
	// a 12,000 budget: worth what they tell the agent.
	sort.SliceStable(chosen, func(i, j int) bool { return chosen[i].src.Seq > chosen[j].src.Seq })
	for _, c := range chosen {
		slices.Sort(c.lines)
	}
	for len(chosen) > 0 {
		segs := []digestSeg{{text: digestHeader + "\n"}}
		for _, c := range chosen {
			segs = append(segs, digestSeg{text: c.head + "\n"})
			for _, k := range c.lines {
				segs = append(segs, digestSeg{text: c.n.lines[k] + "\n", n: c.n, line: k})
			}
		}
		n, err := digestCost(b.s.Tokenizer, b.sess.Encoding, segs, &b.s.counts)
		if err != nil {
			return err
		}
		if base+n <= limit {
			var sb strings.Builder
			for _, sg := range segs {
				sb.WriteString(sg.text)
			}
			d.Content = strings.TrimSuffix(sb.String(), "\n")
			d.Tokens = base + n
			for _, c := range chosen {
				d.Sources = append(d.Sources, c.src.ID)
			}
			break
		}
		// Over (a line merged with its neighbour, or the last line lost
		// its newline): drop the oldest output's last line.
		last := chosen[len(chosen)-1]
		if last.lines = last.lines[:len(last.lines)-1]; len(last.lines) == 0 {
			chosen = chosen[:len(chosen)-1]
		}
	}
	if len(chosen) == 0 {
		return nil
	}
	u := &unit{msgs: []*Message{d}, tokens: d.Tokens, decision: DecisionKeep}
	b.chosen[u] = SourceSummary
	b.use(SourceSummary, d.Tokens)
	b.views[d.ID] = msgView{content: d.Content, tokens: d.Tokens}
	return nil
}

// digestSeg is a piece of the digest's text that ends in a newline; a line
// of a tool output knows where it came from, so its count is cached.
type digestSeg struct {
	text string
	n    *named
	line int
}

// digestCost is the exact token count of the segments joined, without the
// last one's newline, added up from counts of the pieces rather than
// counted whole (which was a third of a late tool-loop call). That is exact
// because every encoding's pre-tokenizer (o200k, cl100k, p50k, r50k) ends
// a piece holding a newline at the newline, or carries it on only through
// whitespace, \r, \n or (o200k, after punctuation) '/': text after a
// newline that starts with anything else starts a new piece, and BPE
// merges never cross pieces. A segment starting with '/' is counted
// together with the one before it; the last is counted without its
// newline. TestDigestCostIsExact checks the sum against a whole count.
//
// counts, when not nil, keeps the counts of single segments that are not an
// output's lines (the headers).
func digestCost(tok Tokenizer, enc string, segs []digestSeg, counts *countCache) (int, error) {
	total := 0
	for i := 0; i < len(segs); {
		j := i + 1
		for j < len(segs) && (segs[j].text == "" || strings.IndexByte(" \t\r\n\v\f/", segs[j].text[0]) >= 0) {
			j++
		}
		if j == i+1 && j < len(segs) && segs[i].n != nil {
			c, err := segs[i].n.lineTokens(tok, enc, segs[i].line)
			if err != nil {
				return 0, err
			}
			total += c
			i = j
			continue
		}
		var sb strings.Builder
		for _, sg := range segs[i:j] {
			sb.WriteString(sg.text)
		}
		text := sb.String()
		if j == len(segs) {
			text = strings.TrimSuffix(text, "\n")
		}
		count := tok.Count
		if counts != nil && j == i+1 && j < len(segs) {
			count = func(enc, text string) (int, error) { return counts.count(tok, enc, text) }
		}
		c, err := count(enc, text)
		if err != nil {
			return 0, fmt.Errorf("count the digest: %w", err)
		}
		total += c
		i = j
	}
	return total, nil
}

// digestHead is the line above an output's lines in the digest: the
// command that made it.
func digestHead(call *ToolCall) string {
	cmd := "tool output"
	if call != nil {
		cmd = call.Function.Name + " " + call.Function.Arguments
	}
	return "[lines from: " + truncateRunes(strings.Join(strings.Fields(cmd), " "), maxDigestCommand) + "]"
}

func truncateRunes(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// answerOnly records the cold messages this window sends without moving
// them back: recoveries for the prompt are logged (recoveries.jsonl says
// what came back for which prompt); cold steps of the tail are not (they
// are there for being recent, every call).
func (b *windowBuilder) answerOnly() {
	var logged []*Message
	for u, src := range b.chosen {
		for _, m := range u.msgs {
			if m.InWindow() || m.Kind == KindDigest {
				continue
			}
			b.res.AnswerOnly = append(b.res.AnswerOnly, m.ID)
			if src == SourceRecovered {
				logged = append(logged, m)
			}
		}
	}
	b.logAnswerOnly(logged)
}
