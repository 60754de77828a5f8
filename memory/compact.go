package memory

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
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
	if err := checkText(req.Prompt); err != nil {
		return nil, Errorf(EINVALID, "prompt: %v", err)
	}
	if len(req.Prompt) > MaxQueryBytes {
		return nil, Errorf(EINVALID, "prompt: %d bytes is over the limit of %d", len(req.Prompt), MaxQueryBytes)
	}
	if req.Trigger == "" {
		req.Trigger = TriggerManual
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(tenant, sessionID)
	defer unlock()
	return s.compactLocked(ctx, tenant, sessionID, req)
}

// lockSession serialises compactions (and recoveries) of one session. The
// locks are striped by a hash of the session: a fixed set, however many
// session ids callers invent (a lock per id would grow without bound).
// Two sessions share a stripe 1 time in len(sessionLocks); no caller holds
// two sessions' locks at once, so sharing cannot deadlock.
func (s *Service) lockSession(tenant, id string) func() {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(id))
	mu := &s.sessionLocks[h.Sum32()%uint32(len(s.sessionLocks))]
	mu.Lock()
	return mu.Unlock
}

func (s *Service) compactLocked(ctx context.Context, tenant, sessionID string, req CompactRequest) (*CompactionReport, error) {
	if err := s.compactSem.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.compactSem.release()
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
	for _, m := range window {
		if pol.pruneLevel(m, sess.AssistantTurns) != PruneNone {
			rep.Pruned = append(rep.Pruned, m.ID)
		}
	}
	rep.Prompt = req.Prompt
	if rep.Prompt == "" {
		rep.Prompt = latestUserText(window)
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
	after := selectUnits(units, pol, rep.TokensBefore, rep.Target)
	summaries, after, err := s.summarizeRuns(ctx, sess, pol, units, rep, after)
	if err != nil {
		return nil, err
	}
	after = dropToTarget(units, after, rep.Target)
	rep.TokensAfter = after
	rep.ProtectedOnly = after > rep.Target
	s.finishReport(rep, units, scores, start)
	if req.DryRun || (len(rep.Dropped) == 0 && len(rep.Summarized) == 0) {
		return rep, nil
	}
	if err := s.commitCompaction(ctx, tenant, sessionID, pol, units, summaries, rep); err != nil {
		return nil, err
	}
	rep.TookMS = float64(time.Since(start).Microseconds()) / 1000
	return rep, nil
}

func latestUserText(window []*Message) string {
	for i := len(window) - 1; i >= 0; i-- {
		if window[i].Role == RoleUser && !window[i].IsSummary() {
			return window[i].Content
		}
	}
	return ""
}

// windowCost is what m costs in the window handed out now.
func (p Policy) windowCost(m *Message, assistantTurns int) int {
	if m.Prune == nil {
		return m.Tokens
	}
	switch p.pruneLevel(m, assistantTurns) {
	case PruneTrimmed:
		return m.Prune.Trimmed
	case PruneCleared:
		return m.Prune.Cleared
	}
	return m.Tokens
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

// summarizeRuns writes one summary per contiguous run of units marked for
// summary. A run whose summary would not be smaller is dropped instead.
func (s *Service) summarizeRuns(ctx context.Context, sess *Session, pol Policy, units []*unit, rep *CompactionReport, estimate int) ([]*Message, int, error) {
	tokens := 0
	for _, u := range units {
		if u.decision == DecisionKeep || u.decision == DecisionProtected {
			tokens += u.tokens
		}
	}
	var out []*Message
	for _, run := range summaryRuns(units) {
		var msgs []*Message
		runTokens := 0
		for _, u := range run {
			msgs = append(msgs, u.msgs...)
			runTokens += u.tokens
		}
		if len(msgs) < minSummaryRun {
			// A summary of one or two turns is mostly header: drop them
			// (still recoverable by id and by search).
			for _, u := range run {
				u.decision = DecisionDrop
			}
			continue
		}
		sum, err := s.Summarizer.Summarize(ctx, SummaryRequest{Messages: msgs, TargetTokens: summaryTarget(pol, sess, runTokens),
			Encoding: sess.Encoding, Prompt: rep.Prompt})
		if err != nil {
			return nil, 0, fmt.Errorf("summarize %d messages: %w", len(msgs), err)
		}
		rep.SummaryMethod = sum.Method
		if sum.Note != "" {
			rep.Notes = append(rep.Notes, sum.Note)
		}
		m := &Message{ID: s.NewID(), Role: RoleAssistant, Content: sum.Text, Kind: KindSummary, State: StateActive,
			Anchor: msgs[0].Seq, CreatedAt: msgs[len(msgs)-1].CreatedAt, Metadata: map[string]any{"summary_method": sum.Method}}
		for _, src := range msgs {
			m.Sources = append(m.Sources, src.ID)
		}
		n, err := MessageTokens(s.Tokenizer, sess.Encoding, m)
		if err != nil {
			return nil, 0, err
		}
		m.Tokens = n
		if n >= runTokens {
			for _, u := range run {
				u.decision = DecisionDrop
			}
			continue
		}
		tokens += n
		out = append(out, m)
	}
	if len(out) > 0 {
		texts := make([]string, len(out))
		for i, m := range out {
			texts[i] = EmbedText(m)
		}
		vecs, err := s.embed(ctx, texts)
		if err != nil {
			return nil, 0, fmt.Errorf("embed summaries: %w", err)
		}
		for i, m := range out {
			m.Vector = vecs[i]
			rep.Summaries = append(rep.Summaries, m.ID)
		}
	}
	return out, tokens, nil
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
func (s *Service) commitCompaction(ctx context.Context, tenant, sessionID string, pol Policy, units []*unit, summaries []*Message, rep *CompactionReport) error {
	now := s.Now().UTC()
	summaryOf := map[string]string{}
	for _, sm := range summaries {
		for _, id := range sm.Sources {
			summaryOf[id] = sm.ID
		}
	}
	cold := ColdInfo{RelevanceScore: 0, Threshold: pol.RelevanceCutoff, PromptAtDrop: truncate(rep.Prompt, maxPromptAtDrop),
		DroppedAt: now, RecoverableUntil: now.AddDate(0, 0, pol.RecoverableForDays)}
	var moved []*Message
	sess, err := s.Store.Update(ctx, tenant, sessionID, func(tx SessionTx) error {
		moved = moved[:0]
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
				ci := cold
				ci.RelevanceScore = u.score
				ci.DropReason = ReasonLowRelevance
				m.State = StateDropped
				if u.decision == DecisionSummarize {
					ci.DropReason, ci.SummaryID, m.State = ReasonSummarized, summaryOf[m.ID], StateSummarized
				} else if u.score > pol.RelevanceCutoff {
					ci.DropReason = ReasonBudget
				}
				m.Cold = &ci
				if err := tx.Put(m); err != nil {
					return err
				}
				moved = append(moved, m)
			}
		}
		for _, sm := range summaries {
			if err := tx.Append(sm); err != nil {
				return err
			}
		}
		tx.Session().Compactions++
		return nil
	})
	if err != nil {
		return fmt.Errorf("commit compaction: %w", err)
	}
	rep.TokensAfter = pol.windowTokens(sess)
	rep.ProtectedOnly = rep.TokensAfter > rep.Target
	s.syncIndex(ctx)
	s.afterCompaction(ctx, tenant, sessionID, pol, moved, rep)
	return nil
}

// afterCompaction mirrors cold chunks (durably, before the compaction is
// acknowledged) and logs events. The store already holds the truth: a
// failure here is logged and repaired by verify, not returned.
func (s *Service) afterCompaction(ctx context.Context, tenant, sessionID string, pol Policy, moved []*Message, rep *CompactionReport) {
	if s.Cold != nil && len(moved) > 0 {
		if err := s.Cold.Append(tenant, sessionID, moved); err != nil {
			s.Logger.Error("mirror cold chunks", "session", sessionID, "err", err)
		}
	}
	s.event("compaction", map[string]any{"tenant": tenant, "session": sessionID, "trigger": rep.Trigger,
		"tokens_before": rep.TokensBefore, "tokens_after": rep.TokensAfter, "target": rep.Target,
		"dropped": len(rep.Dropped), "summarized": len(rep.Summarized), "summaries": rep.Summaries,
		"protected_only": rep.ProtectedOnly, "summary_method": rep.SummaryMethod, "notes": rep.Notes,
		"started_at": rep.StartedAt.Format(time.RFC3339Nano), "took_ms": rep.TookMS, "config": pol})
	for _, m := range moved {
		s.event("drops", map[string]any{"tenant": tenant, "session": sessionID, "chunk": m.ID,
			"reason": m.Cold.DropReason, "score": m.Cold.RelevanceScore, "threshold": m.Cold.Threshold,
			"tokens": m.Tokens, "summary_id": m.Cold.SummaryID})
	}
}

func (s *Service) event(stream string, ev map[string]any) {
	if s.Events == nil {
		return
	}
	if err := s.Events.Log(stream, ev); err != nil {
		s.Logger.Warn("event log", "stream", stream, "err", err)
	}
}

// scoreUnits scores every unprotected unit against the prompt: a unit scores
// as its best message.
func (s *Service) scoreUnits(ctx context.Context, sess *Session, prompt string, window []*Message, units []*unit) (map[string]scoring.Score, error) {
	var qvec []float32
	if strings.TrimSpace(prompt) != "" {
		vecs, err := s.embed(ctx, []string{prompt})
		if err != nil {
			return nil, fmt.Errorf("embed prompt: %w", err)
		}
		qvec = vecs[0]
	}
	var cands []*Message
	for _, u := range units {
		if u.protected == "" {
			cands = append(cands, u.msgs...)
		}
	}
	scores, err := s.scoreMessages(ctx, sess, s.policy(sess).scoringParams(), prompt, qvec, cands, window)
	if err != nil {
		return nil, err
	}
	for _, u := range units {
		if u.protected == "" {
			u.score = unitScore(u, scores, 0)
		}
	}
	return scores, nil
}

func dot(a, b []float32) float64 {
	if len(a) != len(b) {
		return 0
	}
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// recoveryParams rank cold messages for recovery: by similarity and
// importance only. Every cold message is old, so recency says little among
// them, and references counted against the window favoured turns that are
// talked about over turns that answer the prompt. LoCoMo dev, evidence in
// the context window overall (window 4,096, budget 2,048; two runs each):
// policy weights 85.6/85.4 (temporal 93.7), similarity and importance only
// 85.7/86.5 (temporal 96.8), 0.8 similarity with 0.2 references 83.5/84.7.
func (p Policy) recoveryParams() scoring.Params {
	sp := p.scoringParams()
	sp.Weights.Recency, sp.Weights.References = 0, 0
	if sp.Weights.Similarity+sp.Weights.Importance <= 0 {
		return p.scoringParams() // a policy that weighs neither: keep its own
	}
	return sp
}

// scoringParams is the scoring part of the policy.
func (p Policy) scoringParams() scoring.Params {
	sp := scoring.DefaultParams
	sp.Weights = scoring.Weights{Similarity: p.WeightSimilarity, Recency: p.WeightRecency,
		References: p.WeightReferences, Importance: p.WeightImportance}
	sp.HalfLifeTurns = p.RecencyHalfLifeTurns
	return sp
}
