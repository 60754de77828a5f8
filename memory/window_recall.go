package memory

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sort"
	"strings"
)

// The recall block answers the newest input with what older messages said
// about what it names: a user who interrupts a tool loop to ask what an
// output said fifty steps ago, or a tool output naming a function an early
// file view showed. The window's stable part (see window_stable.go) holds
// the newest steps and a digest frozen when the window was last built
// afresh; what the input names beyond those is looked up by name, exactly,
// in the older messages the window does not show, newest first, and their
// lines holding it (a short message whole) go in one block just before the
// newest input: it changes with every prompt, so it sits after everything
// the provider's cache can serve.

// recallHeader opens the recall block.
const recallHeader = "[ctxd: recalled for the newest input: lines of earlier messages holding what it names; the whole messages are the ids in sources, GET /v1/messages/{id}]"

// recallWholeTokens: a message up to this long is recalled whole, a longer
// one by its lines that hold the names.
const recallWholeTokens = 160

// recallPerUserTerm is how many older messages holding a name a user's
// input recalls (newest first).
const recallPerUserTerm = 8

// maxRecallTerms bounds the names and numbers of one input looked up.
const maxRecallTerms = 64

// minNumberTerm is the fewest digits a number needs to be looked up: shorter
// ones (counts, small line numbers) are everywhere.
const minNumberTerm = 4

// recallTerm is one name or number of the input.
type recallTerm struct {
	text   string
	h      uint64 // a name's hash (see namesOf); 0 for a number
	number bool
}

// promptTerms finds the names of the prompt (files, identifiers) and, when
// the user wrote it, its numbers of minNumberTerm digits or more, each once,
// in the prompt's order.
func promptTerms(prompt string, numbers bool) []recallTerm {
	var out []recallTerm
	seen := map[string]bool{}
	add := func(t recallTerm) {
		if !seen[t.text] && len(out) < maxRecallTerms {
			seen[t.text] = true
			out = append(out, t)
		}
	}
	for line := range strings.SplitSeq(prompt, "\n") {
		for _, sp := range lineNames(line) {
			w := line[sp.start:sp.end]
			add(recallTerm{text: w, h: maphash.String(nameSeed, w)})
		}
		if !numbers {
			continue
		}
		for i := 0; i < len(line); {
			if !isNameByte(line[i]) {
				i++
				continue
			}
			j := i
			digits := true
			for j < len(line) && isNameByte(line[j]) {
				digits = digits && line[j] >= '0' && line[j] <= '9'
				j++
			}
			if digits && j-i >= minNumberTerm {
				add(recallTerm{text: line[i:j], number: true})
			}
			i = j
		}
	}
	return out
}

// addRecall puts the recall block for the prompt before b.res.Messages[cur]
// (the newest unit), within what the budget leaves.
func (b *windowBuilder) addRecall(ctx context.Context, originals []*Message, cur int) error {
	msgs := b.res.Messages
	r, _, err := b.recallBlock(ctx, originals, msgs, cur, min(b.recallShare(msgs[cur]), b.avail))
	if err != nil || r == nil {
		return err
	}
	b.use(SourceRecovered, r.Tokens)
	wm := WindowMessage{Message: r, Source: SourceRecovered}
	b.res.Messages = append(msgs[:cur:cur], append([]WindowMessage{wm}, msgs[cur:]...)...)
	return nil
}

// recallShare is the most the recall block before cur may cost.
func (b *windowBuilder) recallShare(cur WindowMessage) int {
	share := RecallToolShare
	if cur.Role == RoleUser {
		share = LoopRecallShare
	}
	return int(share * float64(b.req.MaxTokens))
}

// minRecallTokens is the least room worth a recall block.
const minRecallTokens = 32

// recallBlock is the recall block for the prompt, to stand before msgs[cur]
// within limit tokens (nil if nothing to recall or no room), and whether it
// holds every line found (complete: nothing was left out for want of room).
func (b *windowBuilder) recallBlock(ctx context.Context, originals []*Message, msgs []WindowMessage, cur, limit int) (*Message, bool, error) {
	if strings.TrimSpace(b.req.Prompt) == "" {
		return nil, true, nil
	}
	user := msgs[cur].Role == RoleUser
	terms := promptTerms(b.req.Prompt, user)
	// The names the agent just wrote (its reply and calls): what it works
	// with now, and will likely use again once the tail no longer shows them.
	if m := msgs[cur]; m.Role == RoleAssistant {
		text := m.Content
		for _, tc := range m.ToolCalls {
			text += "\n" + tc.Function.Arguments
		}
		terms = append(terms, promptTerms(text, false)...)
	}
	if len(terms) == 0 {
		return nil, true, nil
	}
	// What the window shows already needs no recall (the newest input
	// itself, which names what it asks about, does not count) unless a
	// user asks: then every older message not shown that holds what the
	// question names is a source (the window may show one line of one of
	// them; the user asked what they said).
	shown := map[string]bool{} // shown whole: not a source to recall
	covered := map[uint64]bool{}
	var text strings.Builder
	for k, wm := range msgs {
		if wm.PruneLevel == PruneNone {
			shown[wm.ID] = true
		}
		if k >= cur || user {
			continue
		}
		for _, hs := range b.s.salient.get(wm.ID, -1, wm.Content).hashes {
			for _, h := range hs {
				covered[h] = true
			}
		}
		text.WriteString(wm.Content)
		text.WriteByte(0)
	}
	all := text.String()
	// Names are looked up by their hash among each message's names; a
	// user's terms (few) and numbers by their text standing alone, which
	// also finds a name inside a longer one (module_name in module_name.py).
	want := map[uint64]int{} // a name's hash -> its term
	var nums []int
	for i, t := range terms {
		switch {
		case user:
			nums = append(nums, i)
		case t.number && termAt(all, t.text) < 0:
			nums = append(nums, i)
		case !t.number && !covered[t.h]:
			want[t.h] = i
		}
	}
	if len(want) == 0 && len(nums) == 0 {
		return nil, true, nil
	}
	// Each term's newest older message, and the lines there that hold it.
	type found struct {
		m     *Message
		first int // the best (earliest in the prompt) term it answers
		lines []string
	}
	bySrc := map[*Message]*found{}
	var srcs []*found
	hit := func(m *Message, term int, line string) {
		f := bySrc[m]
		if f == nil {
			f = &found{m: m, first: term}
			bySrc[m] = f
			srcs = append(srcs, f)
		}
		f.first = min(f.first, term)
		for _, l := range f.lines {
			if l == line {
				return
			}
		}
		f.lines = append(f.lines, line)
	}
	// A user asking what was said of something is shown the last few
	// places it was said; for a tool's output, the newest is enough.
	perTerm := 1
	if user {
		perTerm = recallPerUserTerm
	}
	got, full := map[int]int{}, 0 // hits per term; terms with all their hits
	for i := len(originals) - 1; i >= 0 && full < len(want)+len(nums); i-- {
		m := originals[i]
		if shown[m.ID] || m.Role == RoleSystem || m.Content == "" {
			continue
		}
		n := b.s.salient.get(m.ID, 0, m.Content)
		for _, x := range n.uniq {
			if t, ok := want[x.h]; ok && got[t] < perTerm {
				if got[t]++; got[t] == perTerm {
					full++
				}
				hit(m, t, n.lines[x.line])
			}
		}
		for _, t := range nums {
			k := -1
			if got[t] < perTerm {
				k = termAt(m.Content, terms[t].text)
			}
			if k < 0 {
				continue
			}
			if got[t]++; got[t] == perTerm {
				full++
			}
			hit(m, t, lineAround(m.Content, k, len(terms[t].text)))
		}
	}
	// A user's names that the tail's reach does not hold are searched for
	// in the whole session (a long session's early outputs).
	for t := range terms {
		if !user || got[t] > 0 {
			continue
		}
		older, err := b.searchOlder(ctx, terms[t].text, shown)
		if err != nil {
			return nil, false, err
		}
		for _, m := range older {
			if k := termAt(m.Content, terms[t].text); k >= 0 && got[t] < perTerm {
				got[t]++
				hit(m, t, lineAround(m.Content, k, len(terms[t].text)))
			}
		}
	}
	if len(srcs) == 0 {
		return nil, true, nil
	}
	if limit < minRecallTokens {
		return nil, false, nil
	}
	sort.SliceStable(srcs, func(i, j int) bool { return srcs[i].first < srcs[j].first })
	calls := map[string]*ToolCall{}
	for _, m := range originals {
		for k := range m.ToolCalls {
			calls[m.ToolCalls[k].ID] = &m.ToolCalls[k]
		}
	}
	// Whole when short, else the lines in their own order.
	blocks := make([][]string, len(srcs))
	for i, f := range srcs {
		head := "[from an earlier " + string(f.m.Role) + " message]"
		if f.m.Role == RoleTool {
			head = digestHead(calls[f.m.ToolCallID])
		}
		body := f.lines
		if f.m.Tokens <= recallWholeTokens {
			body = []string{strings.TrimSpace(f.m.Content)}
		} else {
			sort.SliceStable(body, func(x, y int) bool {
				return strings.Index(f.m.Content, body[x]) < strings.Index(f.m.Content, body[y])
			})
		}
		blocks[i] = append([]string{head}, body...)
	}
	r := &Message{ID: "recall-" + msgs[cur].ID, Role: RoleUser, Kind: KindDigest, State: StateActive, SessionID: b.sess.ID}
	complete := true
	for len(blocks) > 0 {
		var sb strings.Builder
		sb.WriteString(recallHeader)
		r.Sources = r.Sources[:0]
		for i, bl := range blocks {
			for _, l := range bl {
				sb.WriteByte('\n')
				sb.WriteString(l)
			}
			r.Sources = append(r.Sources, srcs[i].m.ID)
		}
		r.Content = sb.String()
		n, err := MessageTokens(b.s.Tokenizer, b.sess.Encoding, r)
		if err != nil {
			return nil, false, fmt.Errorf("count the recall block: %w", err)
		}
		if n <= limit {
			r.Tokens = n
			break
		}
		// Over: the last source's last line goes (its header with it).
		complete = false
		last := len(blocks) - 1
		if blocks[last] = blocks[last][:len(blocks[last])-1]; len(blocks[last]) <= 1 {
			blocks = blocks[:last]
		}
	}
	if len(blocks) == 0 {
		return nil, false, nil
	}
	return r, complete, nil
}

// searchOlder finds the session's messages, outside the window, whose text
// may hold term (a text search: the caller checks), newest first.
func (b *windowBuilder) searchOlder(ctx context.Context, term string, shown map[string]bool) ([]*Message, error) {
	hits, err := b.s.Index.Search(ctx, SearchQuery{Tenant: b.sess.Tenant, Text: term, Sessions: []string{b.sess.ID},
		NoSummaries: true, K: 4 * recallPerUserTerm, Mode: ModeText})
	if err != nil {
		return nil, fmt.Errorf("search for a recall: %w", err)
	}
	var ids []string
	for _, h := range hits {
		if !shown[h.ID] {
			ids = append(ids, h.ID)
		}
	}
	msgs, err := b.s.Store.MessagesByID(ctx, b.sess.Tenant, ids, false)
	if err != nil {
		return nil, err
	}
	msgs = slices.DeleteFunc(b.s.unexpired(msgs), func(m *Message) bool { return m.IsSuperseded() || m.IsVersion() || m.IsSummary() })
	sort.SliceStable(msgs, func(i, j int) bool { return msgs[i].Seq > msgs[j].Seq })
	return msgs, nil
}

// termAt is where num (a number or a name) stands alone in text (not
// inside a longer number or name), or -1.
func termAt(text, num string) int {
	for off := 0; ; {
		k := strings.Index(text[off:], num)
		if k < 0 {
			return -1
		}
		k += off
		if (k == 0 || !isNameByte(text[k-1])) && (k+len(num) == len(text) || !isNameByte(text[k+len(num)])) {
			return k
		}
		off = k + 1
	}
}

// lineAround is the line of text holding the n bytes at k, trimmed; a long
// line is cut to the text around them.
func lineAround(text string, k, n int) string {
	lo := strings.LastIndexByte(text[:k], '\n') + 1
	hi := len(text)
	if e := strings.IndexByte(text[k:], '\n'); e >= 0 {
		hi = k + e
	}
	if hi-lo > maxSalientLine {
		lo, hi = max(lo, k-nameContext), min(hi, k+n+nameContext)
	}
	return strings.TrimSpace(strings.ToValidUTF8(text[lo:hi], ""))
}
