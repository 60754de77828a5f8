package memory

import (
	"fmt"
	"unicode/utf8"
)

// Prune levels of a tool result in the window handed out. Stored originals
// are never modified: a level is a view.
const (
	PruneNone    = 0
	PruneTrimmed = 1 // head + "..." + tail, with a note
	PruneCleared = 2 // a placeholder naming the id to recover
	// PruneCut is a result cut head + tail to fit its place in the window
	// (too large for it even when new); it is how level PruneNone shows
	// such a result, reported as its own level.
	PruneCut = 3
)

// minClearTokens is the smallest tool result that is cleared to a
// placeholder once old: below it the placeholder (~30 tokens) saves too
// little to be worth hiding the output. Outputs of coding agents are mostly
// small (median ~60 tokens on recorded runs) but a third of the tokens they
// write sit in outputs of 100-1,000 tokens that only trimming's 4,000
// characters would never have touched: counting those at full cost for good
// forced a compaction every few turns.
const minClearTokens = 64

// PruneCosts are the window costs (tokens, with overhead) of a tool result's
// pruned forms, counted once when it is stored. A zero cost means the form
// does not apply (too short to trim, too small to clear, small enough to
// show whole).
type PruneCosts struct {
	Trimmed int `json:"trimmed"`
	Cleared int `json:"cleared"`
	// Cut is the cost of the result cut to CutHead + CutTail characters
	// (runes), which is how it shows when it is too large for its place.
	Cut     int `json:"cut,omitempty"`
	CutHead int `json:"cut_head,omitempty"`
	CutTail int `json:"cut_tail,omitempty"`
}

// PruneEntry is a tool result the session's window cost depends on.
type PruneEntry struct {
	Turn    int `json:"turn"`
	Full    int `json:"full"`
	Trimmed int `json:"trimmed"`
	Cleared int `json:"cleared"`
	Cut     int `json:"cut,omitempty"`
}

// pruneLevel says how a message shows in the working window when the
// session has had assistantTurns assistant messages. Only tool results are
// pruned; user and assistant messages never are.
func (p Policy) pruneLevel(m *Message, assistantTurns int) int {
	if m.Prune == nil {
		return PruneNone
	}
	if m.Role != RoleTool {
		return m.Prune.level(PruneNone) // cut, when too large for its place
	}
	return m.Prune.level(p.levelAfter(assistantTurns - m.Turn))
}

// level is the form that shows at the scheduled level: the smallest of the
// forms that apply at or below it.
func (c *PruneCosts) level(scheduled int) int {
	best, cost := PruneNone, 0
	if c.Cut > 0 {
		best, cost = PruneCut, c.Cut
	}
	if scheduled >= PruneTrimmed && c.Trimmed > 0 && (cost == 0 || c.Trimmed < cost) {
		best, cost = PruneTrimmed, c.Trimmed
	}
	if scheduled >= PruneCleared && c.Cleared > 0 && (cost == 0 || c.Cleared < cost) {
		best = PruneCleared
	}
	return best
}

func (c *PruneCosts) cost(level, full int) int {
	switch level {
	case PruneTrimmed:
		return c.Trimmed
	case PruneCleared:
		return c.Cleared
	case PruneCut:
		return c.Cut
	}
	return full
}

func (p Policy) levelAfter(turnsSince int) int {
	switch {
	case turnsSince >= p.ToolClearAfterTurns:
		return PruneCleared
	case turnsSince >= p.ToolTrimAfterTurns:
		return PruneTrimmed
	}
	return PruneNone
}

// windowCost is what m costs in the working window now.
func (p Policy) windowCost(m *Message, assistantTurns int) int {
	if m.Prune == nil {
		return m.Tokens
	}
	return m.Prune.cost(p.pruneLevel(m, assistantTurns), m.Tokens)
}

// prunedContent is m's content at a prune level.
func (p Policy) prunedContent(m *Message, level int) string {
	switch level {
	case PruneTrimmed:
		head, tail, n, whole := runeEnds(m.Content, p.ToolKeepHeadChars, p.ToolKeepTailChars)
		if whole {
			return m.Content // stored under a policy that trimmed more
		}
		return fmt.Sprintf("%s\n...\n%s\n[tool result trimmed: %d characters, %d tokens; recover id %s]", head, tail, n, m.Tokens, m.ID)
	case PruneCleared:
		return fmt.Sprintf("[tool result cleared: %d tokens; recover id %s]", m.Tokens, m.ID)
	case PruneCut:
		return cutContent(m, m.Prune.CutHead, m.Prune.CutTail)
	}
	return m.Content
}

// cutContent is m's content cut to its first head and last tail runes, with
// a marker that says what is missing and where the whole output is.
func cutContent(m *Message, head, tail int) string {
	h, t, n, whole := runeEnds(m.Content, head, tail)
	if whole {
		return m.Content
	}
	return fmt.Sprintf("%s\n[... ctxd cut %d of %d characters (%d tokens in all) to fit the window; the whole output: GET /v1/messages/%s ...]\n%s",
		h, n-utf8.RuneCountInString(h)-utf8.RuneCountInString(t), n, m.Tokens, m.ID, t)
}

// runeEnds is s's first head and last tail runes, and its length in runes;
// whole when they cover s. It slices s instead of converting it to runes:
// cutToFit cuts a message some twenty times, and []rune of a 1 MB message
// allocated 4 MB each time (1.3 GB for two 8 MB writes).
func runeEnds(s string, head, tail int) (h, t string, n int, whole bool) {
	n = utf8.RuneCountInString(s)
	head, tail = max(min(head, n), 0), max(min(tail, n), 0)
	if head+tail >= n {
		return s, "", n, true
	}
	i := 0
	for range head {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	j := len(s)
	for range tail {
		_, size := utf8.DecodeLastRuneInString(s[:j])
		j -= size
	}
	return s[:i], s[j:], n, false
}

// cutToFit finds the longest head + tail cut of m (two thirds head: a
// command's output opens with what it is, and ends with its result or
// error) whose message costs at most limit tokens. ok is false when not even
// the marker alone fits.
func cutToFit(tok Tokenizer, enc string, m *Message, limit int) (head, tail, cost int, ok bool, err error) {
	n := utf8.RuneCountInString(m.Content)
	try := func(k int) (int, error) {
		view := *m
		view.Content = cutContent(m, 2*k/3, k-2*k/3)
		return MessageTokens(tok, enc, &view)
	}
	lo, hi := 0, n-1 // the largest k in [lo, hi] whose cost fits
	c, err := try(0)
	if err != nil || c > limit {
		return 0, 0, c, false, err
	}
	cost = c
	// Gallop up from the limit's size before the binary search: each try
	// counts its whole cut, and halving from the whole message counted a
	// 1 MB message ~20 times over (4 s of an 8 MB write) for a cut of a
	// few hundred KB. A token is rarely under one rune, so the cut found
	// is near the first tries.
	for k := max(limit, 1); k < hi; k *= 2 {
		c, err := try(k)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if c > limit {
			hi = k - 1
			break
		}
		lo, cost = k, c
	}
	for lo < hi {
		mid := (lo + hi + 1) / 2
		c, err := try(mid)
		if err != nil {
			return 0, 0, 0, false, err
		}
		if c <= limit {
			lo, cost = mid, c
		} else {
			hi = mid - 1
		}
	}
	return 2 * lo / 3, lo - 2*lo/3, cost, true, nil
}

// pruneCosts counts what a message costs in each of its pruned forms: a
// tool result trimmed and cleared as it ages, and any message but a pinned
// or system one cut when it costs more than maxTokens, its place in the
// window (see toolCaps; 0: no cap). Coding agents do write such messages:
// an assistant turn of 52,000 characters (a file written through a
// heredoc), a user turn of 150,000 (a whole diff): protected as recent,
// they kept sessions past the hard limit whatever compaction dropped.
func (p Policy) pruneCosts(tok Tokenizer, enc string, m *Message, maxTokens int) (*PruneCosts, error) {
	if m.Pinned || m.Role == RoleSystem {
		return nil, nil
	}
	var c PruneCosts
	count := func(level int) (int, error) {
		view := *m
		view.Content = p.prunedContent(m, level)
		return MessageTokens(tok, enc, &view)
	}
	var err error
	if m.Role == RoleTool && utf8.RuneCountInString(m.Content) > p.ToolTrimChars {
		if c.Trimmed, err = count(PruneTrimmed); err != nil {
			return nil, err
		}
	}
	if m.Role == RoleTool && m.Tokens >= minClearTokens {
		if c.Cleared, err = count(PruneCleared); err != nil {
			return nil, err
		}
	}
	if maxTokens > 0 && m.Tokens > maxTokens {
		head, tail, cost, ok, err := cutToFit(tok, enc, m, maxTokens)
		if err != nil {
			return nil, err
		}
		if ok {
			c.CutHead, c.CutTail, c.Cut = max(head, 1), tail, cost
		}
	}
	if c == (PruneCosts{}) {
		return nil, nil
	}
	return &c, nil
}

// toolCaps gives each message of msgs the most it may cost in the window:
// toolShare for one message, and the tool results that follow one another
// (the answers to one assistant call) share it, split so that small results
// keep their whole cost and the large ones divide the rest evenly
// (water-filling).
func toolCaps(msgs []*Message, toolShare int) []int {
	caps := make([]int, len(msgs))
	for i := 0; i < len(msgs); {
		if msgs[i].Role != RoleTool {
			caps[i] = toolShare
			i++
			continue
		}
		j := i
		for j < len(msgs) && msgs[j].Role == RoleTool {
			j++
		}
		group := msgs[i:j]
		order := make([]int, len(group))
		for k := range order {
			order[k] = k
		}
		// smallest first: each takes min(its cost, an even split of what is left)
		for a := 1; a < len(order); a++ {
			for b := a; b > 0 && group[order[b]].Tokens < group[order[b-1]].Tokens; b-- {
				order[b], order[b-1] = order[b-1], order[b]
			}
		}
		left := toolShare
		for k, idx := range order {
			share := left / (len(order) - k)
			caps[i+idx] = max(share, 1)
			left -= min(group[idx].Tokens, share)
		}
		i = j
	}
	return caps
}

// windowTokens is the exact cost of the session's working window: stored
// costs, less what pruning and cutting take off tool results.
func (p Policy) windowTokens(sess *Session) int {
	total := sess.Tokens
	for _, e := range sess.Prunable {
		c := PruneCosts{Trimmed: e.Trimmed, Cleared: e.Cleared, Cut: e.Cut}
		total -= e.Full - c.cost(c.level(p.levelAfter(sess.AssistantTurns-e.Turn)), e.Full)
	}
	return total
}
