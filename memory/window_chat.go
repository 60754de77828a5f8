package memory

import "context"

// A conversation's window, cache-stable. When a chat's newest input is
// stored (a user's message, then a context call for it), the window is the
// pinned messages and the working window whole, in order: between
// compactions that part only grows, call after call, so the provider's
// cache serves all of it but the newest messages. The cold messages this
// prompt recalls go in one block just before the newest input, sent but
// left cold (moving them back would change the working window, and with it
// the cached prefix, on every call). A window whose working window does not
// fit, or a context call for a prompt that is not the newest message (a
// question about the session as it stands), is built by relevance as
// before.

// ChatRecallRoom is the least share of what pinned messages leave that the
// recall block must find free after the working window: with less, the
// window is built by relevance (the working window then no longer fits
// beside what the prompt recalls).
var ChatRecallRoom = 0.2

// buildChat builds a conversation's stable window; ok is false when the
// working window does not leave the recall block its room (the caller then
// builds by relevance).
func (b *windowBuilder) buildChat(ctx context.Context) (res *ContextResult, ok bool, err error) {
	rest := b.avail
	need := 0
	for _, u := range b.units {
		if _, done := b.chosen[u]; !done {
			need += u.tokens
		}
	}
	if need > b.avail-int(ChatRecallRoom*float64(rest)) || !b.takeAllIfFits() {
		return nil, false, nil
	}
	if b.sess.Counts.Dropped+b.sess.Counts.Summarized > 0 {
		if err := b.embedPrompt(ctx); err != nil {
			return nil, false, err
		}
		if err := b.findRecoverable(ctx); err != nil {
			return nil, false, err
		}
		b.takeRecovered(min(b.avail, int(b.s.Shares.Recovered*float64(rest))))
		b.answerOnly()
	}
	res = b.assemble()
	// The recall block: the recovered messages, in their order, moved to
	// just before the newest unit.
	// The newest input: the newest unit that is not a pinned note written
	// after it.
	newest := ""
	for i := len(b.units) - 1; i >= 0 && newest == ""; i-- {
		if b.chosen[b.units[i]] != SourcePinned {
			newest = b.units[i].msgs[0].ID
		}
	}
	var stable, recalled []WindowMessage
	at := -1
	for _, wm := range res.Messages {
		switch {
		case wm.Source == SourceRecovered:
			recalled = append(recalled, wm)
		default:
			if wm.ID == newest {
				at = len(stable)
			}
			stable = append(stable, wm)
		}
	}
	if at < 0 || len(recalled) == 0 {
		return res, true, nil
	}
	res.Messages = append(append(stable[:at:at], recalled...), stable[at:]...)
	return res, true, nil
}
