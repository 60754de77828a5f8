package memory

// Recovery brings cold originals back into the working window: by id
// (Recover, with the rest of their tool-call group) or for a prompt (the
// window builder's recovered level: findRecoverable, takeRecovered,
// commitRecoveries).

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// findRecoverable searches the session's cold originals for the prompt and
// scores them: the candidates for the recovered level.
func (b *windowBuilder) findRecoverable(ctx context.Context) error {
	if b.qvec == nil || b.sess.Counts.Dropped+b.sess.Counts.Summarized == 0 {
		return nil
	}
	s, sess := b.s, b.sess
	// Active messages the recent level did not take are searched with the
	// cold ones: they compete for the same budget on the same scores.
	hits, err := s.Index.Search(ctx, SearchQuery{Tenant: sess.Tenant, Text: b.req.Prompt, Vector: b.qvec,
		Sessions: []string{sess.ID}, NoSummaries: true, K: recoveryCandidates + min(len(b.window), recoveryCandidates), Mode: ModeHybrid})
	if err != nil {
		return fmt.Errorf("search cold storage: %w", err)
	}
	ids := make([]string, len(hits))
	for i, h := range hits {
		ids[i] = h.ID
	}
	cold, err := s.Store.MessagesByID(ctx, sess.Tenant, ids, true)
	if err != nil {
		return err
	}
	cold = s.unexpired(cold)
	inWindow := map[uint64]bool{}
	for _, m := range b.window {
		inWindow[m.Seq] = true
	}
	seen := map[uint64]bool{}
	var units []*unit
	var all []*Message
	unitOf := map[string]*unit{}
	for _, u := range b.units {
		for _, m := range u.msgs {
			unitOf[m.ID] = u
		}
	}
	for rank, m := range cold {
		if m.InWindow() {
			u := unitOf[m.ID]
			if _, done := b.chosen[u]; u == nil || done || seen[u.msgs[0].Seq] || u.msgs[0].IsSummary() {
				continue
			}
			u.active = true
			for _, g := range u.msgs {
				seen[g.Seq] = true
				all = append(all, g)
			}
			units = append(units, u)
			continue
		}
		// Originals only: a cold summary holds no turn verbatim, and its
		// sources are candidates themselves.
		if seen[m.Seq] || m.IsSummary() || m.IsVersion() || m.IsSuperseded() || !(m.State == StateDropped || m.State == StateSummarized) {
			continue
		}
		// The next turn pays for the best few hits only; for all of them it
		// spends the budget multi-hop questions need on neighbours.
		group, err := s.coldGroup(ctx, sess.Tenant, sess.ID, m, b.s.RecoverNext && rank < recoverNextTop)
		if err != nil {
			return err
		}
		u := &unit{decision: DecisionKeep}
		for _, g := range group {
			if inWindow[g.Seq] || seen[g.Seq] {
				continue
			}
			u.msgs = append(u.msgs, g)
			u.tokens += b.cost(g)
		}
		// Half a tool group cannot be sent; a group whose other half is in
		// the window already is left to that half.
		if len(u.msgs) == 0 || !u.complete() {
			continue
		}
		for _, g := range u.msgs {
			seen[g.Seq] = true
			all = append(all, g)
		}
		units = append(units, u)
	}
	var docs []*Message
	docs = append(docs, b.window...)
	for _, m := range all {
		if !m.InWindow() {
			docs = append(docs, m)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].Position() < docs[j].Position() })
	// The hybrid search just ranked these by full text: reuse its scores
	// rather than search 10k cold documents again.
	textScores := make(map[string]float64, len(hits))
	for _, h := range hits {
		textScores[h.ID] = h.TextScore
	}
	sp := b.params(b.pol.recoveryParams())
	scores, err := s.scoreWith(sp, b.qvec, all, docs, textScores)
	if err != nil {
		return err
	}
	for id, sc := range scores {
		b.scores[id] = sc
	}
	for _, u := range units {
		// A unit is worth what the message the prompt matched is worth, not
		// its neighbour: score it by its best member.
		u.score = unitScore(u, scores, sp.WhenBonus)
	}
	b.recover = units
	return nil
}

// coldGroup is a cold message with what must come back with it: the rest of
// its tool-call group, and (withNext) the turn right after it, which in a
// conversation often holds the answer to what the matched turn raised.
func (s *Service) coldGroup(ctx context.Context, tenant, sessionID string, m *Message, withNext bool) ([]*Message, error) {
	if m.Role != RoleTool && len(m.ToolCalls) == 0 {
		// A plain turn: only its replies may come along.
		if !withNext {
			return []*Message{m}, nil
		}
		return s.withReplies(ctx, tenant, sessionID, m)
	}
	const reach = 16
	after := uint64(0)
	if m.Seq > reach {
		after = m.Seq - reach
	}
	near, err := s.Store.Messages(ctx, tenant, sessionID, MessageQuery{AfterSeq: after, Limit: 2*reach + 1})
	if err != nil {
		return nil, err
	}
	units := groupUnits(near, func(*Message) int { return 0 })
	for i, u := range units {
		for _, x := range u.msgs {
			if x.Seq != m.Seq {
				continue
			}
			group := u.msgs
			if next := i + 1; withNext && next < len(units) && len(units[next].msgs) == 1 && units[next].complete() && !units[next].msgs[0].InWindow() && !units[next].msgs[0].IsVersion() && !units[next].msgs[0].IsSuperseded() {
				group = append(append([]*Message{}, group...), units[next].msgs[0])
			}
			return group, nil
		}
	}
	return []*Message{m}, nil
}

// Replies of a recovered plain turn that come along with it.
const (
	// maxReplies: the turn after, and when that one asks back ("How long
	// have you been into art?" answering "How long have you been creating
	// art?"), the answer to it. LoCoMo dev, evidence in window, temporal
	// and overall, three runs: the turn after only 96.8 x3, 86.3-86.7;
	// with the answer to a question asked back 96.8 x3 (the extra turns
	// cost another temporal turn its place), 86.2-86.4; with replyGap too
	// 96.8-98.4, 86.7-87.5.
	maxReplies = 2
	// replyGap: a turn written this long after the one before it starts a
	// new exchange; it is no reply, and bringing it along only spends the
	// budget (LoCoMo: the first turn of the next day's session).
	replyGap = time.Hour
)

// withReplies is a cold plain turn with the cold turns that answer it: the
// turn right after, and the one after that while the turn before it ends in a
// question, none written more than replyGap after the turn it answers.
func (s *Service) withReplies(ctx context.Context, tenant, sessionID string, m *Message) ([]*Message, error) {
	next, err := s.Store.Messages(ctx, tenant, sessionID, MessageQuery{AfterSeq: m.Seq, Limit: maxReplies})
	if err != nil {
		return nil, err
	}
	group := []*Message{m}
	for _, n := range next {
		prev := group[len(group)-1]
		if n.Role == RoleTool || len(n.ToolCalls) > 0 || n.InWindow() || n.IsSummary() || n.IsVersion() || n.IsSuperseded() || n.CreatedAt.Sub(prev.CreatedAt) > replyGap {
			break
		}
		group = append(group, n)
		if !endsInQuestion(n.Content) {
			break
		}
	}
	return group, nil
}

// endsInQuestion reports whether a text ends with a question mark, before a
// trailing bracketed note such as "[shares image: ...]".
func endsInQuestion(text string) bool {
	text = strings.TrimSpace(text)
	if strings.HasSuffix(text, "]") {
		if i := strings.LastIndexByte(text, '['); i > 0 {
			text = strings.TrimSpace(text[:i])
		}
	}
	return strings.HasSuffix(text, "?")
}

// takeRecovered adds the best cold units while they fit in limit, none
// below the relevance cutoff. Similarity is scaled over this prompt's
// candidates, so the cutoff is relative to them: when none stands out (one
// candidate, or all alike, and all score 0) nothing is cut.
func (b *windowBuilder) takeRecovered(limit int) {
	sort.SliceStable(b.recover, func(i, j int) bool { return b.recover[i].score > b.recover[j].score })
	cutoff := b.pol.RelevanceCutoff
	if len(b.recover) == 0 || b.recover[0].score <= cutoff {
		cutoff = 0
	}
	used := 0
	for _, u := range b.recover {
		if _, done := b.chosen[u]; done || u.tokens > b.avail || used+u.tokens > limit {
			continue
		}
		if u.score < cutoff {
			continue // the share it leaves flows to the working level
		}
		src := SourceRecovered
		if u.active {
			src = SourceWorking
		}
		b.chosen[u] = src
		b.use(src, u.tokens)
		used += u.tokens
	}
}

// commitRecoveries moves the chosen cold messages back into the window, best
// first, while the window stays under the compaction trigger. The rest are
// answer-only: sent in this window (source recovered) and logged, but left
// cold. Moving them in too would carry the window past the trigger, and the
// compaction that follows would drop them (or what they displaced) again:
// measured on 10k cold messages, that churn of state changes, index updates
// and compactions was most of a context call's cost (p50 119 ms).
func (b *windowBuilder) commitRecoveries(ctx context.Context) error {
	tokens := b.pol.windowTokens(b.sess)
	budget := b.pol.Budget()
	var ids []string
	var answerOnly []*Message
	scores := map[string]float64{}
	for _, u := range b.recover { // best first (takeRecovered sorted them)
		if b.chosen[u] != SourceRecovered {
			continue
		}
		if !belowTrigger(budget.State(tokens+u.tokens, b.sess.ContextWindow)) {
			answerOnly = append(answerOnly, u.msgs...)
			continue
		}
		tokens += u.tokens
		for _, m := range u.msgs {
			ids = append(ids, m.ID)
			scores[m.ID] = b.scores[m.ID].Total
		}
	}
	b.logAnswerOnly(answerOnly)
	for _, m := range answerOnly {
		b.res.AnswerOnly = append(b.res.AnswerOnly, m.ID)
	}
	if len(ids) == 0 {
		return nil
	}
	if b.req.Preview {
		b.res.Recovered = ids
		return nil
	}
	recovered, changed, err := b.s.recoverLocked(ctx, b.sess.Tenant, b.sess.ID, ids, b.req.Prompt, scores)
	if err != nil {
		return fmt.Errorf("recover cold messages: %w", err)
	}
	if changed {
		// The store holds the truth; the index catches up off this call's
		// latency (a search may miss the new states for a moment).
		b.s.syncIndexSoon()
	}
	byID := map[string]*Message{}
	for _, m := range recovered {
		byID[m.ID] = m
	}
	for _, u := range b.recover {
		for i, m := range u.msgs {
			if r := byID[m.ID]; r != nil {
				u.msgs[i] = r
			}
		}
	}
	b.res.Recovered = ids
	return nil
}

func belowTrigger(state string) bool { return state == WindowOK || state == WindowFlushDue }

// logAnswerOnly logs the cold messages this window sends without moving them
// back, so recoveries.jsonl still says what came back for which prompt.
func (b *windowBuilder) logAnswerOnly(msgs []*Message) {
	if b.req.Preview {
		return // a preview is not a call: it brought nothing back
	}
	now := b.s.Now().UTC()
	for _, m := range msgs {
		b.s.event("recoveries", map[string]any{"tenant": b.sess.Tenant, "session": b.sess.ID, "chunk": m.ID,
			"score": b.scores[m.ID].Total, "prompt": truncate(b.req.Prompt, maxPromptAtDrop), "tokens": m.Tokens,
			"at": now, "answer_only": true})
	}
}

// Recover puts a dropped or summarized message back into the working window
// as recovered. Recovering an active or recovered message changes nothing.
func (s *Service) Recover(ctx context.Context, sessionID, messageID, prompt string, score float64) (*Message, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(ctx, tenant, sessionID)
	defer unlock()
	// Expiry holds at read time: what is past its retention is purged
	// now, not at the next purge, and is not found.
	if n, _, err := s.purgeSession(ctx, tenant, sessionID, s.Now()); err != nil && ErrorCode(err) != ENOTFOUND {
		return nil, err
	} else if n > 0 {
		s.syncIndex(ctx)
	}
	msgs, changed, err := s.recoverLocked(ctx, tenant, sessionID, []string{messageID}, prompt, map[string]float64{messageID: score})
	if err != nil {
		return nil, err
	}
	if changed {
		s.syncIndex(ctx)
	}
	return msgs[0], nil
}

// recoverLocked recovers messages in one transaction and logs them; the
// caller holds the session's lock and brings the index up to date (changed:
// some message left cold storage). Unknown ids are ENOTFOUND.
func (s *Service) recoverLocked(ctx context.Context, tenant, sessionID string, ids []string, prompt string, scores map[string]float64) ([]*Message, bool, error) {
	ids, err := s.withToolGroups(ctx, tenant, sessionID, ids)
	if err != nil {
		return nil, false, err
	}
	var out, changed []*Message
	now := s.Now().UTC()
	_, err = s.Store.Update(ctx, tenant, sessionID, func(tx SessionTx) error {
		out, changed = out[:0], changed[:0]
		for _, id := range ids {
			m, err := tx.Message(id)
			if err != nil {
				return err
			}
			if m.State == StateDropped || m.State == StateSummarized {
				m.State = StateRecovered
				if err := tx.Put(m); err != nil {
					return err
				}
				changed = append(changed, m)
			}
			out = append(out, m)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	for _, m := range changed {
		s.event("recoveries", map[string]any{"tenant": tenant, "session": sessionID, "chunk": m.ID,
			"score": scores[m.ID], "prompt": truncate(prompt, maxPromptAtDrop), "tokens": m.Tokens, "at": now})
	}
	// The mirror is not rewritten here: it lists what went cold since the
	// last purge, and a recovered original is still kept, so its line stays
	// true. Rewriting 10k chunks per recovery cost ~200 ms a context call.
	return out, len(changed) > 0, nil
}

// withToolGroups widens ids to whole tool-call groups: a tool result comes
// back with the call that asked for it, and a call with all its results.
func (s *Service) withToolGroups(ctx context.Context, tenant, sessionID string, ids []string) ([]string, error) {
	msgs, err := s.Store.MessagesByID(ctx, tenant, ids, false)
	if err != nil {
		return nil, err
	}
	found := map[string]*Message{}
	for _, m := range msgs {
		if m.SessionID == sessionID {
			found[m.ID] = m
		}
	}
	var out []string
	seen := map[string]bool{}
	for _, id := range ids {
		m := found[id]
		if m == nil {
			return nil, Errorf(ENOTFOUND, "message %s not found in session %s", id, sessionID)
		}
		if err := checkRecoverVersion(m); err != nil {
			return nil, err
		}
		group := []*Message{m}
		if m.Role == RoleTool || len(m.ToolCalls) > 0 {
			if group, err = s.coldGroup(ctx, tenant, sessionID, m, false); err != nil {
				return nil, err
			}
		}
		for _, g := range group {
			if !seen[g.ID] {
				seen[g.ID] = true
				out = append(out, g.ID)
			}
		}
	}
	return out, nil
}
