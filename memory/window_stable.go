package memory

import (
	"context"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
)

// A provider bills the exact prefix a call repeats from the previous one at
// a tenth of the price (OpenAI's automatic prompt cache, Anthropic's
// cache_control breakpoints). A tool loop's window that slides by a step
// each call, or whose digest changes each call, repeats almost nothing past
// the task, and costs several times what a plain "keep everything until it
// is full, then cut" agent pays. So between compactions of the window a
// tool loop's window is the previous one plus the new messages: its layout
// (which messages, in which form, and the digest of what lies before them)
// is frozen when the window is built afresh, and kept until the window no
// longer fits its budget, or something it shows was edited, deleted or
// replaced. Whatever varies with the prompt (lines recalled for what the
// newest input names) goes in one block just before the newest input,
// after everything that repeats.
//
// The layout lives in memory, not in the store: it is a hint for a cache
// that lives minutes at the provider, rebuilt by the next call after a
// restart (one cache miss, which the provider's cache expiry would mostly
// have caused anyway), and persisting it would add a write to every call
// that changes it. It is rebuilt the same way from the same history.
// Several nodes on a shared store are the exception (window_shared.go).

// LoopFillPct is the share of max_tokens a tool loop's window fills when it
// is built afresh; the rest is room to grow, call after call, with the
// prefix cached. Lower fills grow longer before the next rebuild but show
// less history verbatim. A rebuild sends all but the system prompt and the
// task uncached, so what it fills is paid in full once and at a tenth on
// every call after. On the 71 recorded coding-agent runs (budget 12,000)
// 0.45 with LoopKeepShare 0.35 cost 1,487 input tokens per call (needed
// names in window 97.5), 0.28 with 0.28 1,427 (96.9); on the first 20,
// 0.25 cost 15 less than 0.28 for a point of needed names, and 0.15 left
// the tail no room (needed 85.5).
var LoopFillPct = 0.28

// LoopKeepShare is the least share of what pinned messages, the current
// turn and the task leave that a window built afresh gives the digest and
// the tail, however large the current turn (see LoopFillPct).
var LoopKeepShare = 0.28

// LoopRecallShare bounds the recall block (lines of older messages holding
// what the newest input names): a share of max_tokens, for an input the
// user wrote; RecallToolShare for a tool's output, whose many names would
// otherwise fill it every call with lines the step rarely needs.
var (
	LoopRecallShare = 0.12
	RecallToolShare = 0.05
)

// layoutEntry is what the service keeps about a session's last window.
type layoutEntry struct {
	keys   []uint64    // each message of the last window, as sent
	layout *loopLayout // the frozen part of the last tool-loop window; nil if none
	// chatFrom is where the stable part of the last conversation window
	// started (a turn's position; 0 if none), for max_tokens chatMax.
	chatFrom uint64
	chatMax  int
}

// loopLayout is the stable part of a tool loop's last window: everything but
// the recall block, in order.
type loopLayout struct {
	maxTokens int
	msgs      []layoutMsg
	curStart  int    // msgs[curStart:] is the newest unit (the recall block goes before it)
	lastSeq   uint64 // the newest original the layout has passed
	pinned    string // the pinned messages' ids and contents, joined
}

// layoutMsg is one message of the layout. An original is read again from
// the store each call and shown at level (its content must hash the same,
// or the layout is rebuilt); a message the window wrote (summary, digest,
// a cut view) keeps its text.
type layoutMsg struct {
	id      string
	source  string
	level   int
	tokens  int
	hash    uint64   // of the content as sent
	orig    uint64   // of an original's stored content (an edit changes it)
	written *Message // summary, digest or cut view: the message as sent
}

// layoutCache holds the sessions' last windows. When full it starts over:
// each session then rebuilds its next window once.
type layoutCache struct {
	mu sync.Mutex
	m  map[string]*layoutEntry
}

const maxLayouts = 4096

func layoutKey(tenant, session string) string { return tenant + "\x00" + session }

func (c *layoutCache) get(key string) *layoutEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[key]
}

func (c *layoutCache) put(key string, e *layoutEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || (len(c.m) >= maxLayouts && c.m[key] == nil) {
		c.m = map[string]*layoutEntry{}
	}
	c.m[key] = e
}

// messageKey hashes a message as a provider sees it: role, name, content,
// tool calls and the call it answers.
func messageKey(m *Message) uint64 {
	h := fnv.New64a()
	w := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	w(string(m.Role))
	w(m.Name)
	w(m.Content)
	w(m.ToolCallID)
	for _, tc := range m.ToolCalls {
		w(tc.ID)
		w(tc.Function.Name)
		w(tc.Function.Arguments)
	}
	return h.Sum64()
}

func contentHash(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// noteWindow sets res.StablePrefix against the session's previous window and
// (unless a preview) keeps this one's keys for the next call.
func (s *Service) noteWindow(ctx context.Context, tenant, session string, res *ContextResult, preview bool, b *windowBuilder) {
	keys := make([]uint64, len(res.Messages))
	for i, wm := range res.Messages {
		keys[i] = messageKey(wm.Message)
	}
	if prev := b.prev; prev != nil {
		n := 0
		for n < len(keys) && n < len(prev.keys) && keys[n] == prev.keys[n] {
			n++
		}
		res.StablePrefix = n
	}
	if !preview {
		s.putLayout(ctx, tenant, session, &layoutEntry{keys: keys, layout: b.layout, chatFrom: b.chatFrom, chatMax: b.req.MaxTokens})
	}
}

// pinnedSig is the pinned messages chosen for this window, as they show.
func (b *windowBuilder) pinnedSig() string {
	var parts []string
	for _, u := range b.units {
		if b.chosen[u] != SourcePinned {
			continue
		}
		for _, m := range u.msgs {
			parts = append(parts, m.ID+":"+b.pol.prunedContent(m, b.pol.pruneLevel(m, b.sess.AssistantTurns)))
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x00")
}

// indexOriginals maps the messages a window may show by id: the working
// window's and the tail's.
func (b *windowBuilder) indexOriginals(originals []*Message) {
	b.orig = make(map[string]*Message, len(b.window)+len(originals))
	for _, m := range b.window {
		b.orig[m.ID] = m
	}
	for _, m := range originals {
		b.orig[m.ID] = m
	}
}

// freeze records the window just built (without its recall block) as the
// session's layout. cur is the newest unit's first message id ("" if none).
func (b *windowBuilder) freeze(msgs []WindowMessage, cur string, lastSeq uint64) *loopLayout {
	if cur == "" || lastSeq == 0 {
		return nil
	}
	l := &loopLayout{maxTokens: b.req.MaxTokens, lastSeq: lastSeq, pinned: b.pinnedSig(), curStart: -1}
	for i, wm := range msgs {
		if wm.ID == cur {
			l.curStart = i
		}
		lm := layoutMsg{id: wm.ID, source: wm.Source, level: wm.PruneLevel, tokens: wm.Tokens, hash: contentHash(wm.Content)}
		if wm.IsSummary() || wm.Kind == KindDigest || wm.PruneLevel == PruneCut {
			w := *wm.Message
			w.Vector = nil
			lm.written = &w
		}
		if m := b.orig[wm.ID]; m != nil && !wm.IsSummary() {
			lm.orig = contentHash(m.Content)
		}
		l.msgs = append(l.msgs, lm)
	}
	if l.curStart < 0 {
		return nil
	}
	return l
}

// extend builds the window from the session's layout: the layout's messages
// as they were sent, the units stored since, and the recall block before
// the newest. ok is false when the layout no longer holds (the caller
// builds the window afresh): a message it shows changed or is gone, pinned
// messages changed, or it no longer fits.
func (b *windowBuilder) extend(ctx context.Context, l *loopLayout, originals []*Message) (ok bool, err error) {
	if l == nil || l.maxTokens != b.req.MaxTokens || l.pinned != b.pinnedSig() {
		return false, nil
	}
	byID := b.orig
	liveSummary := map[string]bool{}
	for _, u := range b.units {
		if u.msgs[0].IsSummary() {
			liveSummary[u.msgs[0].ID] = true
		}
	}
	var out []WindowMessage
	used := 0
	for _, lm := range l.msgs {
		var view Message
		switch {
		case lm.written != nil && lm.written.Kind == KindDigest:
			// A digest or an earlier recall block. Its lines must still
			// be history: a source deleted, edited or replaced since (or,
			// rarely, beyond the tail's reach) rebuilds the window.
			for _, id := range lm.written.Sources {
				if byID[id] == nil {
					return false, nil
				}
			}
			view = *lm.written
		case lm.written != nil && lm.written.IsSummary():
			if !liveSummary[lm.id] {
				return false, nil
			}
			view = *lm.written
		default:
			m := byID[lm.id]
			if m == nil || m.IsSuperseded() {
				return false, nil
			}
			view = *m
			if contentHash(m.Content) != lm.orig {
				return false, nil // edited
			}
			if lm.written != nil {
				view.Content = lm.written.Content
			} else {
				view.Content = b.pol.prunedContent(m, lm.level)
				if contentHash(view.Content) != lm.hash {
					return false, nil
				}
			}
			view.Tokens = lm.tokens
		}
		view.Vector = nil
		out = append(out, WindowMessage{Message: &view, Source: lm.source, PruneLevel: lm.level})
		if lm.source != SourcePinned {
			used += lm.tokens
		}
	}
	// The units stored since.
	var fresh []*Message
	for _, m := range originals {
		if m.Seq <= l.lastSeq {
			continue
		}
		if m.Pinned || m.IsStandingSystem() {
			return false, nil // pinned and system messages lead the window: rebuild
		}
		fresh = append(fresh, m)
	}
	units := groupUnits(fresh, b.fullCost)
	lastSeq := l.lastSeq
	if n := len(units); n > 0 && !units[n-1].complete() {
		units = units[:n-1] // the newest unit is not whole yet: it waits
	}
	curStart := l.curStart
	for _, u := range units {
		if !u.complete() {
			return false, nil
		}
		curStart = len(out)
		for _, m := range u.msgs {
			view := *m
			view.Vector = nil
			view.Content, view.Tokens = b.pol.prunedContent(m, b.fullLevel(m)), b.fullCost(m)
			out = append(out, WindowMessage{Message: &view, Source: SourceRecent, PruneLevel: b.fullLevel(m)})
			lastSeq = max(lastSeq, m.Seq)
		}
		used += u.tokens
	}
	if used > b.avail {
		return false, nil // the window must shrink: build it afresh
	}
	if room := b.avail - used; out[curStart].Role == RoleUser && room < b.recallShare(out[curStart]) {
		// A user's input gets its recall's room: built afresh, the window
		// leaves it. But a rebuild is a cache miss: only when what the
		// input recalls does not fit in the room the extended window
		// leaves (on 20 recorded runs with four questions each, questions
		// rebuilt 23 windows before this check, 8 with it).
		_, complete, err := b.recallBlock(ctx, originals, out, curStart, room)
		if err != nil {
			return false, err
		}
		if !complete {
			return false, nil
		}
	}
	for _, wm := range out {
		if wm.Source != SourcePinned {
			b.use(wm.Source, wm.Tokens)
		}
		if wm.Seq != 0 && !wm.InWindow() && wm.Kind != KindDigest {
			b.res.AnswerOnly = append(b.res.AnswerOnly, wm.ID) // cold, sent as it stands
		}
	}
	b.res.Messages = out
	if err := b.addRecall(ctx, originals, curStart); err != nil {
		return false, err
	}
	if b.layout = b.freeze(b.res.Messages, out[curStart].ID, lastSeq); b.layout == nil {
		return false, nil
	}
	b.finishTokens()
	return true, nil
}

// finishTokens sets the window's token count from its messages.
func (b *windowBuilder) finishTokens() {
	used := b.res.Budget.PromptTokens + ReplyPriming
	for _, wm := range b.res.Messages {
		used += wm.Tokens
	}
	b.res.Tokens, b.res.Budget.Used = used, used
}
