package memory

import "context"

// A conversation's window, cache-stable. When a chat's newest input is
// stored (a user's message, then a context call for it), the window is the
// pinned messages, then a stable part of the working window in order, then
// one recall block just before the newest input: the older turns this
// prompt recalls, cold ones sent but left cold (moving them back would
// change the working window, and with it the cached prefix, on every
// call). Between compactions the stable part only grows, call after call,
// so the provider's cache serves all of it but the block and the newest
// messages.
//
// The stable part is the working window whole while that leaves the block
// its room (ChatRecallRoom of the budget, at most ChatRecallMax tokens). A
// working window too large for that is cut: its newest turns, up to
// ChatFillPct of the budget, from a turn the session's layout keeps
// (window_stable.go); the turns before the cut compete with the cold ones
// for the block, by relevance to the prompt. The cut stays where it is
// while the part after it leaves the block its room, so the prefix breaks
// once every few turns, not on every call as a window chosen by relevance
// does (it changes near its start with each prompt). The session's rolling
// summary leads a whole working window when it fits beside it; a cut one
// leaves it out, as the relevance-chosen window does (DefaultShares): the
// block's verbatim turns answer better than it.
//
// A context call for a prompt that is not the newest message (a question
// about the session as it stands) is built by relevance as before.

// ChatRecallRoom and ChatRecallMax are the room the recall block finds
// free after the stable part: a share of what pinned messages leave, at
// most ChatRecallMax tokens (what one prompt recalls does not grow with the
// budget). ChatFillPct is the share a stable part cut afresh fills; the
// rest of the way to the block's room is room to grow before the next cut.
//
// Measured on LoCoMo dev (window 4,096, budget 2,048), evidence in window
// with each question stored first (eval --stored-prompt), and the share of
// window tokens cached with the conversations replayed as chats (eval
// --agent --chat): the working window whole while it left 20%, summary
// included, 79.8 and 49.9%; cut at room/fill 0.45/0.3 84.8 and 30.1%,
// 0.5/0.25 86.1 and 27.0%, 0.6/0.2 86.7 and 21.0%, and 0.6/0.2 with the
// summary 85.1 (the relevance-chosen window, which nothing caches past the
// pinned messages, 88.2). A larger block shows more and caches less. At
// window 16,000 and budget 12,000 the working window (at most its 8,000
// trigger) leaves ChatRecallMax free: taken whole as before, 76.7% cached.
var (
	ChatRecallRoom = 0.5
	ChatRecallMax  = 1500
	ChatFillPct    = 0.25
)

// buildChat builds a conversation's stable window; ok is false when not
// even the newest input fits beside the recall block's room (the caller
// then builds by relevance).
func (b *windowBuilder) buildChat(ctx context.Context) (res *ContextResult, ok bool, err error) {
	rest := b.avail
	var work []*unit // the working window's turns, oldest first
	var summary *unit
	for _, u := range b.units {
		switch _, done := b.chosen[u]; {
		case done:
		case u.msgs[0].IsSummary():
			summary = u
		default:
			work = append(work, u)
		}
	}
	if len(work) == 0 {
		return nil, false, nil
	}
	limit := rest - min(int(ChatRecallRoom*float64(rest)), ChatRecallMax)
	from, ok := b.chatCut(work, limit, rest)
	if !ok {
		return nil, false, nil
	}
	b.chatFrom = work[from].msgs[0].Position()
	stable := map[*unit]bool{}
	used := 0
	for _, u := range work[from:] {
		stable[u] = true
		used += u.tokens
	}
	if summary != nil && from == 0 && used+summary.tokens <= limit {
		stable[summary] = true
		b.chosen[summary] = SourceSummary
		b.use(SourceSummary, summary.tokens)
	}
	for _, u := range work[from:] {
		b.chosen[u] = SourceWorking
		b.use(SourceWorking, u.tokens)
	}
	if b.sess.Counts.Dropped+b.sess.Counts.Summarized > 0 || from > 0 {
		if err := b.embedPrompt(ctx); err != nil {
			return nil, false, err
		}
		if err := b.findRecoverable(ctx); err != nil {
			return nil, false, err
		}
		b.takeRecovered(min(b.avail, int(b.s.Shares.Recovered*float64(rest))))
		if from > 0 && b.avail > 0 {
			// Turns before the cut that the search did not bring (a
			// session with nothing cold) compete on their scores.
			if err := b.scoreWindow(ctx); err != nil {
				return nil, false, err
			}
			b.takeBest(SourceWorking, func(u *unit) bool { return !u.msgs[0].IsSummary() }, b.avail)
		}
		b.answerOnly()
	}
	res = b.assemble()
	// The recall block: the chosen turns outside the stable part, in their
	// order, moved to just before the newest unit (the newest that is not
	// a pinned note written after it).
	newest := work[len(work)-1].msgs[0].ID
	inStable := map[string]bool{}
	for u := range b.chosen {
		if stable[u] || b.chosen[u] == SourcePinned {
			for _, m := range u.msgs {
				inStable[m.ID] = true
			}
		}
	}
	var kept, recalled []WindowMessage
	at := -1
	for _, wm := range res.Messages {
		switch {
		case !inStable[wm.ID]:
			recalled = append(recalled, wm)
		default:
			if wm.ID == newest {
				at = len(kept)
			}
			kept = append(kept, wm)
		}
	}
	if at < 0 || len(recalled) == 0 {
		b.chatUntil = len(res.Messages)
		return res, true, nil
	}
	b.chatUntil = at
	res.Messages = append(append(kept[:at:at], recalled...), kept[at:]...)
	return res, true, nil
}

// chatCut is where the stable part starts in work (the working window's
// turns, oldest first): at the cut the session's last window kept, while
// the turns from there fit in limit; else at the first turn when the whole
// working window fits; else cut afresh, the newest turns up to ChatFillPct
// of rest. ok is false when the newest turn alone does not fit in limit.
func (b *windowBuilder) chatCut(work []*unit, limit, rest int) (from int, ok bool) {
	after := make([]int, len(work)+1) // tokens of work[i:]
	for i := len(work) - 1; i >= 0; i-- {
		after[i] = after[i+1] + work[i].tokens
	}
	if e := b.prev; e != nil && e.chatMax == b.req.MaxTokens && e.chatFrom != 0 {
		i := 0
		for i < len(work)-1 && work[i].msgs[0].Position() < e.chatFrom {
			i++
		}
		if after[i] <= limit {
			return i, true
		}
	}
	if after[0] <= limit {
		return 0, true
	}
	if after[len(work)-1] > limit {
		return 0, false
	}
	fill := int(ChatFillPct * float64(rest))
	from = len(work) - 1
	for from > 0 && after[from-1] <= fill {
		from--
	}
	return from, true
}
