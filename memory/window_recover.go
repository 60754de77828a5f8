package memory

// The window builder's recovered level: the cold originals a prompt asks
// for come back into the window (findRecoverable, takeRecovered,
// commitRecoveries). Recovery by id is recover.go.

import (
	"context"
	"fmt"
	"sort"
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
			"score": b.scores[m.ID].Total, "prompt": Truncate(b.req.Prompt, maxPromptAtDrop), "tokens": m.Tokens,
			"at": now, "answer_only": true})
	}
}
