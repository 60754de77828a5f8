package memory

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// AppendResult is what a store call answers.
type AppendResult struct {
	IDs        []string
	Tokens     []int
	Session    *Status
	Compaction *CompactionReport // when this write triggered a compaction
}

// Append validates, counts, embeds and durably stores msgs at the end of a
// session (created with the defaults if new), then indexes them. Either all
// messages are stored or none.
func (s *Service) Append(ctx context.Context, sessionID string, msgs []*Message) (*AppendResult, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return nil, Errorf(EINVALID, "messages: send 1 to %d messages", s.Limits.MaxMessagesPerCall)
	}
	if len(msgs) > s.Limits.MaxMessagesPerCall {
		return nil, Errorf(ETOOLARGE, "messages: %d is over the limit of %d per call; split the batch", len(msgs), s.Limits.MaxMessagesPerCall)
	}
	for i, m := range msgs {
		if err := m.Validate(i, s.Limits); err != nil {
			return nil, err
		}
	}
	tenant := TenantFromContext(ctx)
	sess, err := s.Store.Session(ctx, tenant, sessionID)
	if ErrorCode(err) == ENOTFOUND {
		sess, err = s.newSession(tenant, sessionID)(), nil
	}
	if err != nil {
		return nil, err
	}
	if err := s.prepare(ctx, sess.Encoding, sess.ContextWindow, s.policy(sess), msgs); err != nil {
		return nil, err
	}
	sess, err = s.Store.Append(ctx, tenant, sessionID, s.newSession(tenant, sessionID), msgs)
	if err != nil {
		return nil, err
	}
	s.syncIndex(ctx)
	res := &AppendResult{}
	for _, m := range msgs {
		res.IDs = append(res.IDs, m.ID)
		res.Tokens = append(res.Tokens, m.Tokens)
	}
	res.Session, res.Compaction = s.afterAppend(ctx, tenant, sessionID, sess)
	return res, nil
}

// afterAppend compacts a window the write carried past the trigger (before
// the write is answered, so the agent's next call fits), once the agent has
// had its chance to flush: a compaction that drops or summarizes comes
// after a flush_prompt, always. When the write jumps past the trigger before
// the agent was told, this answer tells it and the compaction waits one
// turn; past the hard limit it cannot wait, so only the urgent part runs
// (to just under the trigger) and its report says no flush was offered.
// The write itself is durable already: a failure here is reported in the
// answer, not as an error.
func (s *Service) afterAppend(ctx context.Context, tenant, sessionID string, sess *Session) (*Status, *CompactionReport) {
	st := s.status(sess)
	var rep *CompactionReport
	told := sess.FlushTold == sess.Compactions+1
	if st.State == WindowOverLimit || st.State == WindowCompactionDue {
		req := CompactRequest{Trigger: TriggerAuto}
		if st.State == WindowOverLimit {
			req.Trigger, req.NoFlush = TriggerHardLimit, !told
		}
		var err error
		rep, err = s.Compact(ctx, sessionID, req)
		if err != nil {
			s.Logger.Error("compaction after write failed", "session", sessionID, "err", err)
			rep = &CompactionReport{Trigger: req.Trigger, Error: ErrorMessage(err)}
		}
		if fresh, err := s.Store.Session(ctx, tenant, sessionID); err == nil {
			st = s.status(fresh)
		}
	}
	s.event("context-health", map[string]any{"tenant": tenant, "session": sessionID, "tokens": st.Tokens,
		"limit": st.ContextWindow, "pct_used": st.PctUsed, "state": st.State,
		"next_compaction_in_tokens": max(int(st.Policy.TriggerPct*float64(st.ContextWindow))-st.Tokens, 0)})
	if st.FlushPrompt != "" {
		// This answer is the one that tells the agent; later ones this cycle
		// do not repeat it.
		if _, err := s.Store.Update(ctx, tenant, sessionID, func(tx SessionTx) error {
			tx.Session().FlushTold = tx.Session().Compactions + 1
			return nil
		}); err != nil {
			s.Logger.Warn("record flush prompt", "session", sessionID, "err", err)
		}
	}
	return st, rep
}

// prepare fills in what the server owns: id, state, time, exact tokens, vector.
func (s *Service) prepare(ctx context.Context, enc string, window int, pol Policy, msgs []*Message) error {
	now := s.Now().UTC()
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		m.ID = s.NewID()
		m.State = StateActive
		m.Kind, m.Sources = "", nil
		if m.CreatedAt.IsZero() {
			m.CreatedAt = now
		}
		m.CreatedAt = m.CreatedAt.UTC()
		texts[i] = EmbedText(m)
	}
	if err := countTokens(s.Tokenizer, enc, msgs); err != nil {
		return err
	}
	caps := toolCaps(msgs, int(pol.ToolResultMaxPct*float64(window)))
	for i, m := range msgs {
		var err error
		if m.Prune, err = pol.pruneCosts(s.Tokenizer, enc, m, caps[i]); err != nil {
			return err
		}
	}
	vecs, err := s.embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("embed %d messages: %w", len(msgs), err)
	}
	if len(vecs) != len(msgs) {
		return fmt.Errorf("embedder returned %d vectors for %d texts", len(vecs), len(msgs))
	}
	for i, m := range msgs {
		m.Vector = vecs[i]
	}
	return nil
}

// ListMessages pages through a session's messages in order. states holds
// state names or "all"; the cursor is opaque to callers (the last seq seen).
func (s *Service) ListMessages(ctx context.Context, sessionID string, states []string, cursor string, limit int) ([]*Message, string, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, "", err
	}
	limit, err := pageSize(limit)
	if err != nil {
		return nil, "", err
	}
	q := MessageQuery{Limit: limit + 1}
	if q.States, err = ParseStates(states); err != nil {
		return nil, "", err
	}
	if cursor != "" {
		if q.AfterSeq, err = strconv.ParseUint(cursor, 10, 64); err != nil {
			return nil, "", Errorf(EINVALID, "cursor: not a cursor this server gave out")
		}
	}
	msgs, err := s.Store.Messages(ctx, TenantFromContext(ctx), sessionID, q)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(msgs) > limit {
		msgs = msgs[:limit]
		next = strconv.FormatUint(msgs[limit-1].Seq, 10)
	}
	return msgs, next, nil
}

// ParseStates reads a state filter: names, comma lists, or "all" (no filter).
func ParseStates(in []string) ([]State, error) {
	var out []State
	for _, v := range in {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "" || name == "all":
				continue
			case !State(name).Valid():
				return nil, Errorf(EINVALID, "state: %q is not one of active, summarized, dropped, recovered, all", name)
			}
			out = append(out, State(name))
		}
	}
	for _, v := range in {
		if v == "all" {
			return nil, nil
		}
	}
	return out, nil
}

// ParseTime reads an optional RFC 3339 time for field.
func ParseTime(field, v string) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, Errorf(EINVALID, "%s: %q is not an RFC 3339 time (e.g. 2026-01-02T15:04:05Z)", field, v)
	}
	return t, nil
}
