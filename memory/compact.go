package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/ctxd/ctxd/scoring"
)

// Compaction triggers.
const (
	TriggerManual    = "manual"
	TriggerAuto      = "auto"       // a write carried the window past the trigger
	TriggerHardLimit = "hard_limit" // the window was past max_context_pct
)

// CompactRequest asks for a compaction.
type CompactRequest struct {
	Prompt  string // what to keep relevant to; default the latest user message
	DryRun  bool   // report what would happen, change nothing
	Trigger string
	// NoFlush says the agent could not be offered a flush before this
	// compaction (one write jumped past the hard limit): it compacts only
	// the urgent part, to just under the trigger, and the rest waits for
	// the flush the answer offers.
	NoFlush bool
}

// CompactionReport says what a compaction did (or would do), and why.
type CompactionReport struct {
	Trigger       string          `json:"trigger"`
	DryRun        bool            `json:"dry_run"`
	TokensBefore  int             `json:"tokens_before"`
	TokensAfter   int             `json:"tokens_after"`
	Target        int             `json:"target"`
	Dropped       []string        `json:"dropped"`
	Summarized    []string        `json:"summarized"`
	Summaries     []string        `json:"summaries"`
	Pruned        []string        `json:"pruned"`
	ProtectedOnly bool            `json:"protected_only,omitempty"`
	Prompt        string          `json:"prompt,omitempty"`
	SummaryMethod string          `json:"summary_method,omitempty"`
	Notes         []string        `json:"notes,omitempty"`
	Scores        []ScoredMessage `json:"scores,omitempty"`
	StartedAt     time.Time       `json:"started_at"`
	TookMS        float64         `json:"took_ms"`
	Error         string          `json:"error,omitempty"`
	// FlushOffered says whether the agent was offered a flush (flush_prompt)
	// before this compaction dropped or summarized anything; set for
	// compactions the server started.
	FlushOffered *bool `json:"flush_offered,omitempty"`

	// summarizedTokens is what the originals summarized cost in the window,
	// sectionTokens what their section of the summary costs: the event log
	// keeps both, for the compression ratio.
	summarizedTokens, sectionTokens int
}

// ScoredMessage explains one message's fate in a compaction.
type ScoredMessage struct {
	ID         string              `json:"id"`
	Tokens     int                 `json:"tokens"`
	Decision   string              `json:"decision"`
	Reason     string              `json:"reason,omitempty"`
	Score      float64             `json:"score"`
	Components *scoring.Components `json:"components,omitempty"`
}

// minSummaryRun is the shortest run of messages worth a summary.
const minSummaryRun = 3

// maxPromptAtDrop bounds the prompt kept with each cold chunk.
const maxPromptAtDrop = 2000

// Compact compacts a session now. One compaction per session runs at a time;
// writes go on meanwhile and are neither lost nor double-counted.
func (s *Service) Compact(ctx context.Context, sessionID string, req CompactRequest) (*CompactionReport, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	if err := checkPrompt(req.Prompt, s.Limits); err != nil {
		return nil, err
	}
	if req.Trigger == "" {
		req.Trigger = TriggerManual
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(ctx, tenant, sessionID)
	defer unlock()
	return s.compactLocked(ctx, tenant, sessionID, req)
}

func (s *Service) compactLocked(ctx context.Context, tenant, sessionID string, req CompactRequest) (*CompactionReport, error) {
	if err := s.compactSem.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.compactSem.release()
	// Its scores read the index.
	s.syncPending(ctx, tenant, []string{sessionID})
	start := time.Now() // after the wait: took_ms is the compaction's own time
	sess, err := s.Store.Session(ctx, tenant, sessionID)
	if err != nil {
		return nil, err
	}
	pol := s.policy(sess)
	window, err := s.Store.Messages(ctx, tenant, sessionID, MessageQuery{States: []State{StateActive, StateRecovered}, Vectors: true})
	if err != nil {
		return nil, err
	}
	sort.SliceStable(window, func(i, j int) bool { return window[i].Position() < window[j].Position() })
	cost := func(m *Message) int { return pol.windowCost(m, sess.AssistantTurns) }
	rep := &CompactionReport{Trigger: req.Trigger, DryRun: req.DryRun, TokensBefore: pol.windowTokens(sess), StartedAt: start.UTC(),
		Target:  int(pol.TargetPct * float64(sess.ContextWindow)),
		Dropped: []string{}, Summarized: []string{}, Summaries: []string{}, Pruned: []string{}}
	if req.Trigger != TriggerManual {
		offered := !req.NoFlush
		rep.FlushOffered = &offered
	}
	if req.NoFlush {
		rep.Target = int(pol.TriggerPct*float64(sess.ContextWindow)) - 1
		rep.Notes = append(rep.Notes, "no flush could be offered before this compaction (one write passed the hard limit): it compacted to just under the trigger, and the rest waits for the flush this answer offers")
	}
	for _, m := range window {
		if pol.pruneLevel(m, sess.AssistantTurns) != PruneNone {
			rep.Pruned = append(rep.Pruned, m.ID)
		}
	}
	rep.Prompt = queryPart(req.Prompt)
	if rep.Prompt == "" {
		rep.Prompt = queryPart(latestUserText(window))
	}
	units := groupUnits(window, cost)
	protect(units, pol.KeepRecent)
	if rep.TokensBefore <= rep.Target {
		rep.TokensAfter = rep.TokensBefore
		rep.Notes = append(rep.Notes, "window is already at or under the target")
		return s.finishReport(rep, units, nil, start), nil
	}
	scores, err := s.scoreUnits(ctx, sess, rep.Prompt, window, units)
	if err != nil {
		return nil, err
	}
	selectUnits(units, pol, rep.TokensBefore, rep.Target)
	roll, after, err := s.rollSummary(ctx, sess, pol, window, units, rep)
	if err != nil {
		return nil, err
	}
	after = dropToTarget(units, after, rep.Target)
	rep.TokensAfter = after
	rep.ProtectedOnly = after > rep.Target
	s.finishReport(rep, units, scores, start)
	if req.DryRun {
		return rep, nil
	}
	if len(rep.Dropped) == 0 && len(rep.Summarized) == 0 {
		return rep, s.holdCompactions(ctx, tenant, sessionID, pol, rep)
	}
	err = s.commitCompaction(ctx, tenant, sessionID, sess.Compactions, pol, units, roll, rep)
	if errors.Is(err, errCompactedMeanwhile) {
		// Another node compacted the session after this one read it:
		// this compaction's choices (and its rolling summary, extended
		// from the version it read) are stale. Nothing was written.
		rep.Dropped, rep.Summarized, rep.Summaries, rep.TokensAfter = []string{}, []string{}, []string{}, rep.TokensBefore
		rep.Notes = append(rep.Notes, "the session was compacted elsewhere (another node) while this compaction was decided: nothing of it was applied")
		return rep, nil
	}
	if err != nil {
		return nil, err
	}
	rep.TookMS = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

// holdCompactions records a compaction that could free nothing (every
// message left is protected: pinned, recent, the first request), so that
// automatic compactions wait for the window to grow before they try again,
// and says so in its report.
func (s *Service) holdCompactions(ctx context.Context, tenant, sessionID string, pol Policy, rep *CompactionReport) error {
	if rep.TokensBefore <= rep.Target {
		return nil
	}
	var hold int
	sess, err := s.Store.Update(ctx, tenant, sessionID, func(tx SessionTx) error {
		hold = max(pol.windowTokens(tx.Session()), 1)
		tx.Session().CompactHold, tx.Session().CompactHoldSeq = hold, tx.Session().LastSeq
		return nil
	})
	if err != nil {
		return fmt.Errorf("hold compactions: %w", err)
	}
	rep.Notes = append(rep.Notes, fmt.Sprintf("nothing could be freed: every message left in the window is protected (pinned, system, important, "+
		"the first request or the %d most recent); automatic compactions wait until the window grows past %d tokens, %d more messages come, or it reaches the hard limit",
		pol.KeepRecent, hold+pol.holdBand(sess), pol.KeepRecent))
	return nil
}

func latestUserText(window []*Message) string {
	for i := len(window) - 1; i >= 0; i-- {
		if window[i].Role == RoleUser && !window[i].IsSummary() {
			return window[i].Content
		}
	}
	return ""
}

// selectUnits decides, lowest score first, what leaves the window: every
// unit at or below the relevance cutoff is dropped; then units are marked
// for summary until the window (counting an estimate of the summaries) is
// at or under the target. The best min_chunks_to_keep units always stay.
// It returns the estimated window cost after.
func selectUnits(units []*unit, pol Policy, tokens, target int) int {
	var cands []*unit
	for _, u := range units {
		if u.protected == "" {
			cands = append(cands, u)
		}
	}
	sort.SliceStable(cands, func(i, j int) bool { return cands[i].score < cands[j].score })
	keep := map[*unit]bool{}
	for i := len(cands) - 1; i >= 0 && len(keep) < pol.MinChunksToKeep; i-- {
		keep[cands[i]] = true
	}
	for _, u := range cands {
		if u.score <= pol.RelevanceCutoff && !keep[u] {
			u.decision = DecisionDrop
			tokens -= u.tokens
		}
	}
	// A summary costs about a fifth of what it replaces, capped per run.
	summarized := 0
	estimate := func() int { return tokens + min(summarized/5, pol.SummaryTargetTokens*(1+summarized/4000)) }
	for _, u := range cands {
		if estimate() <= target {
			break
		}
		if u.decision != DecisionKeep || keep[u] {
			continue
		}
		u.decision = DecisionSummarize
		tokens -= u.tokens
		summarized += u.tokens
	}
	return estimate()
}

// dropToTarget drops kept units lowest-first while the window is still over
// the target after summaries (reason budget). Protected units stay.
func dropToTarget(units []*unit, tokens, target int) int {
	if tokens <= target {
		return tokens
	}
	var kept []*unit
	for _, u := range units {
		if u.decision == DecisionKeep {
			kept = append(kept, u)
		}
	}
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].score < kept[j].score })
	for _, u := range kept {
		if tokens <= target {
			break
		}
		u.decision = DecisionDrop
		tokens -= u.tokens
	}
	return tokens
}

// finishReport lists the decisions and, for dry runs, every score.
func (s *Service) finishReport(rep *CompactionReport, units []*unit, scores map[string]scoring.Score, start time.Time) *CompactionReport {
	for _, u := range units {
		for _, m := range u.msgs {
			switch u.decision {
			case DecisionDrop:
				rep.Dropped = append(rep.Dropped, m.ID)
			case DecisionSummarize:
				rep.Summarized = append(rep.Summarized, m.ID)
			}
			if !rep.DryRun {
				continue
			}
			sm := ScoredMessage{ID: m.ID, Tokens: m.Tokens, Decision: u.decision, Reason: u.protected, Score: u.score}
			if sc, ok := scores[m.ID]; ok {
				c := sc.Components
				sm.Components = &c
			}
			rep.Scores = append(rep.Scores, sm)
		}
	}
	rep.TookMS = float64(time.Since(start).Microseconds()) / 1000
	return rep
}

// summaryTarget sizes a run's summary: at most summary_target_tokens, a
// third of what it replaces (or it saves little), and a tenth of the window
// (or one summary crowds out the turns it should make room for).
func summaryTarget(pol Policy, sess *Session, runTokens int) int {
	return max(min(pol.SummaryTargetTokens, runTokens/3, sess.ContextWindow/10), 32)
}

// commitCompaction writes every change in one store transaction (so a crash
// leaves the session as before or as after), then updates the indexes, the
// cold-storage mirror and the event logs.
// errCompactedMeanwhile: the session's compaction count moved between the
// compaction's read and its commit.
var errCompactedMeanwhile = errors.New("compacted meanwhile")

// commitCompaction writes the compaction decided on a session read with
// `compactions` compactions; one that finds another commit since (only
// possible across nodes: a node serialises its own) applies nothing.
func (s *Service) commitCompaction(ctx context.Context, tenant, sessionID string, compactions int, pol Policy, units []*unit, roll *rolled, rep *CompactionReport) error {
	now := s.Now().UTC()
	summaryOf := map[string]string{}
	var summaries []*Message
	if roll.summary != nil {
		summaries = append(summaries, roll.summary)
		for _, id := range roll.summary.Sources {
			summaryOf[id] = roll.summary.ID
		}
	}
	cold := ColdInfo{RelevanceScore: 0, Threshold: pol.RelevanceCutoff, PromptAtDrop: Truncate(rep.Prompt, maxPromptAtDrop),
		DroppedAt: now, RecoverableUntil: now.AddDate(0, 0, pol.RecoverableForDays)}
	var moved, mirror []*Message
	sess, err := s.Store.Update(ctx, tenant, sessionID, func(tx SessionTx) error {
		moved, mirror = moved[:0], mirror[:0]
		if tx.Session().Compactions != compactions {
			return errCompactedMeanwhile
		}
		for _, u := range units {
			if u.decision != DecisionDrop && u.decision != DecisionSummarize {
				continue
			}
			for _, orig := range u.msgs {
				m, err := tx.Message(orig.ID)
				if err != nil {
					return err
				}
				if !m.InWindow() {
					continue // recovered and dropped again meanwhile? leave it be
				}
				firstTime := m.Cold == nil
				ci := cold
				ci.RelevanceScore = u.score
				ci.DropReason = ReasonLowRelevance
				m.State = StateDropped
				if u.decision == DecisionSummarize {
					ci.DropReason, ci.SummaryID, m.State = ReasonSummarized, summaryOf[m.ID], StateSummarized
				} else if u.score > pol.RelevanceCutoff {
					ci.DropReason = ReasonBudget
				}
				if !firstTime {
					// back in cold storage after a recovery: it keeps the
					// time it first went cold (its retention), and its
					// mirror line, written then, stays true
					ci.DroppedAt, ci.RecoverableUntil = m.Cold.DroppedAt, m.Cold.RecoverableUntil
				}
				m.Cold = &ci
				if err := tx.Put(m); err != nil {
					return err
				}
				moved = append(moved, m)
				if firstTime {
					mirror = append(mirror, m)
				}
			}
		}
		if len(roll.released) > 0 { // only a rolling summary releases
			if err := releaseSources(tx, roll.summary.ID, roll.released, ReasonSummaryRolled); err != nil {
				return err
			}
		}
		for _, sm := range summaries {
			if sm.Seq != 0 {
				if err := tx.Put(sm); err != nil { // the rolling summary, extended
					return err
				}
				continue
			}
			if err := tx.Append(sm); err != nil {
				return err
			}
		}
		tx.Session().Compactions++
		tx.Session().CompactHold, tx.Session().CompactHoldSeq = pol.holdAfter(tx.Session()), tx.Session().LastSeq
		return nil
	})
	if errors.Is(err, errCompactedMeanwhile) {
		return err
	}
	if err != nil {
		return fmt.Errorf("commit compaction: %w", err)
	}
	rep.TokensAfter = pol.windowTokens(sess)
	rep.ProtectedOnly = rep.TokensAfter > rep.Target
	s.syncIndex(ctx)
	s.afterCompaction(ctx, tenant, sessionID, pol, moved, mirror, rep)
	return nil
}

// afterCompaction mirrors the originals that went cold for the first time
// (durably, before the compaction is acknowledged: one line per original,
// append-only) and logs events. The store already holds the truth: a
// failure here is logged and repaired by verify, not returned.
func (s *Service) afterCompaction(ctx context.Context, tenant, sessionID string, pol Policy, moved, mirror []*Message, rep *CompactionReport) {
	if s.Cold != nil && len(mirror) > 0 {
		if err := s.Cold.Append(tenant, sessionID, mirror); err != nil {
			s.mirrorFailed("mirror the cold originals of session "+sessionID, err)
		}
	}
	s.event("compaction", map[string]any{"tenant": tenant, "session": sessionID, "trigger": rep.Trigger,
		"tokens_before": rep.TokensBefore, "tokens_after": rep.TokensAfter, "target": rep.Target,
		"dropped": len(rep.Dropped), "summarized": len(rep.Summarized), "summaries": rep.Summaries,
		"protected_only": rep.ProtectedOnly, "summary_method": rep.SummaryMethod, "pruned": len(rep.Pruned),
		"summarized_tokens": rep.summarizedTokens, "summary_tokens": rep.sectionTokens, "notes": rep.Notes, "flush_offered": rep.FlushOffered,
		"started_at": rep.StartedAt.Format(time.RFC3339Nano), "took_ms": rep.TookMS, "config": pol})
	for _, m := range moved {
		s.event("drops", map[string]any{"tenant": tenant, "session": sessionID, "chunk": m.ID,
			"reason": m.Cold.DropReason, "score": m.Cold.RelevanceScore, "threshold": m.Cold.Threshold,
			"tokens": m.Tokens, "summary_id": m.Cold.SummaryID})
	}
}

// compactInBackground compacts a session after the caller's answer; Close
// waits for it.
func (s *Service) compactInBackground(tenant, sessionID, prompt string) {
	key := tenant + "\x00" + sessionID
	if _, queued := s.queued.LoadOrStore(key, true); queued {
		return // one queued compaction per session is enough
	}
	s.wg.Add(1)
	s.bg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.bg.Done()
		defer s.queued.Delete(key)
		ctx := NewContextWithTenant(context.Background(), tenant)
		unlock := s.lockSession(ctx, tenant, sessionID)
		defer unlock()
		sess, err := s.Store.Session(ctx, tenant, sessionID)
		if err != nil || s.status(sess).State == WindowOK || s.status(sess).State == WindowFlushDue {
			return // compacted meanwhile, or gone
		}
		if sess.FlushTold != sess.Compactions+1 {
			return // the agent has not been offered its flush: the next write offers it, then compacts
		}
		if st := s.status(sess); st.State == WindowCompactionDue && s.policy(sess).compactHeld(sess, st.Tokens) {
			return // the last compaction could not get under the trigger: wait for growth
		}
		if _, err := s.compactLocked(ctx, tenant, sessionID, CompactRequest{Prompt: prompt, Trigger: TriggerAuto}); err != nil {
			s.Logger.Error("background compaction failed", "session", sessionID, "err", err)
		}
	}()
}

// holdBand is how far past a held compaction's level the window grows
// before automatic compactions try again: what one compaction frees
// (trigger to target).
func (p Policy) holdBand(sess *Session) int {
	return max(int((p.TriggerPct-p.TargetPct)*float64(sess.ContextWindow)), 1)
}

// compactHeld reports whether an automatic compaction of a window of
// tokens, past the trigger and under the hard limit, waits: the last one
// could not get under the trigger, and since then the window has not grown
// a band nor have keep_recent messages come (which end the protection of
// the messages that were recent then).
func (p Policy) compactHeld(sess *Session, tokens int) bool {
	return sess.CompactHold > 0 && tokens < sess.CompactHold+p.holdBand(sess) &&
		sess.LastSeq < sess.CompactHoldSeq+uint64(max(p.KeepRecent, 1))
}

// holdAfter is the CompactHold a compaction leaves: the window's cost when
// it is still at or past the trigger, else 0.
func (p Policy) holdAfter(sess *Session) int {
	if t := p.windowTokens(sess); float64(t) >= p.TriggerPct*float64(sess.ContextWindow) {
		return t
	}
	return 0
}
