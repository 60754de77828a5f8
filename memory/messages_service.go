package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
	// Replayed: the write's idempotency key was seen before; nothing was
	// stored and IDs and Tokens are the first write's.
	Replayed bool
}

// Append validates, counts, embeds and durably stores msgs at the end of a
// session (created with the defaults if new), then indexes them. Either all
// messages are stored or none.
func (s *Service) Append(ctx context.Context, sessionID string, msgs []*Message) (*AppendResult, error) {
	return s.AppendWith(ctx, sessionID, msgs, AppendOptions{})
}

// AppendWith is Append with options. A message whose client id
// (message_id) the session holds already is not stored again: the stored
// message's id and tokens stand in its place in the answer. A write whose
// idempotency key the session has seen (WriteKeyTTL) stores nothing and is
// answered as the first was; ECONFLICT when it carries other messages.
// Pinned and system messages past the session's pinned budget: ECONFLICT,
// nothing stored.
func (s *Service) AppendWith(ctx context.Context, sessionID string, msgs []*Message, opt AppendOptions) (*AppendResult, error) {
	if err := s.validateAppend(sessionID, msgs, opt); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	hash := ""
	if opt.IdempotencyKey != "" {
		var err error
		if hash, err = requestHash(msgs); err != nil {
			return nil, err
		}
		rec, err := s.Store.WriteKey(ctx, tenant, sessionID, opt.IdempotencyKey)
		if err != nil {
			return nil, err
		}
		if rec = liveRecord(rec, s.Now()); rec != nil {
			return s.replay(ctx, tenant, sessionID, rec, hash)
		}
	}
	sess, err := s.Store.Session(ctx, tenant, sessionID)
	if ErrorCode(err) == ENOTFOUND {
		sess, err = s.newSession(tenant, sessionID)(), nil
	}
	if err != nil {
		return nil, err
	}
	known, err := s.knownClientIDs(ctx, tenant, sessionID, msgs)
	if err != nil {
		return nil, err
	}
	var fresh []*Message
	for _, m := range msgs {
		if known[m.ClientID] == nil {
			fresh = append(fresh, m)
		}
	}
	if err := s.prepare(ctx, sess.Encoding, sess.ContextWindow, s.policy(sess), fresh); err != nil {
		return nil, err
	}
	res := &AppendResult{}
	var replayed *WriteRecord
	sess, err = s.Store.Write(ctx, tenant, sessionID, s.newSession(tenant, sessionID), func(tx SessionTx) error {
		res.IDs, res.Tokens, replayed = res.IDs[:0], res.Tokens[:0], nil
		if opt.IdempotencyKey != "" {
			rec, err := tx.WriteKey(opt.IdempotencyKey)
			if err != nil {
				return err
			}
			if replayed = liveRecord(rec, s.Now()); replayed != nil {
				return errReplay // a copy of this write committed while it was prepared
			}
		}
		if err := s.appendTx(tx, msgs, known, res); err != nil || opt.IdempotencyKey == "" {
			return err
		}
		now := s.Now().UTC()
		return tx.PutWriteKey(&WriteRecord{Key: opt.IdempotencyKey, Hash: hash, IDs: res.IDs, Tokens: res.Tokens, At: now},
			now.Add(-WriteKeyTTL), MaxWriteKeysPerSession)
	})
	if errors.Is(err, errReplay) {
		return s.replay(ctx, tenant, sessionID, replayed, hash)
	}
	if err != nil {
		return nil, err
	}
	if len(fresh) == 0 {
		res.Session = s.status(sess)
		return res, nil
	}
	s.deferIndex(ctx, tenant, sessionID, messageBytes(fresh))
	res.Session, res.Compaction = s.afterAppend(ctx, tenant, sessionID, sess, opt.Untold)
	return res, nil
}

func (s *Service) validateAppend(sessionID string, msgs []*Message, opt AppendOptions) error {
	if err := ValidateSessionID(sessionID); err != nil {
		return err
	}
	if len(msgs) == 0 {
		return Errorf(EINVALID, "messages: send 1 to %d messages", s.Limits.MaxMessagesPerCall)
	}
	if len(msgs) > s.Limits.MaxMessagesPerCall {
		return Errorf(ETOOLARGE, "messages: %d is over the limit of %d per call; split the batch", len(msgs), s.Limits.MaxMessagesPerCall)
	}
	if err := ValidateMessages(msgs, s.Limits); err != nil {
		return err
	}
	if opt.IdempotencyKey != "" {
		if err := ValidateIdempotencyKey(opt.IdempotencyKey); err != nil {
			return err
		}
	}
	return checkClientIDs(msgs)
}

// ValidateMessages checks each message of a write, and that no tool call
// of the write is answered twice: both results would stand in every window.
// A result answers the latest call with its id (some models number their
// calls call_0, call_1 again on every turn).
func ValidateMessages(msgs []*Message, lim Limits) error {
	return validateMessagesFrom(msgs, 0, lim)
}

// validateMessagesFrom is ValidateMessages for msgs whose first known
// messages that are not standing system messages were validated before
// (HistoryRepeat): those are not again, but for results answering a call
// twice, which is checked across all. The known part is read only back
// from a new result whose call is not among the new messages, to that
// call: a bookkeeping of every call and result cost each call of an agent
// what its history had grown to.
func validateMessagesFrom(msgs []*Message, known int, lim Limits) error {
	from := len(msgs) // the first message past the known ones
	seen := 0         // messages not standing system messages so far
	for i, m := range msgs {
		standing := m.IsStandingSystem()
		if !standing {
			seen++
		}
		if !standing && seen > known && from == len(msgs) {
			from = i
		}
		if standing || seen > known {
			if err := m.Validate(i, lim); err != nil {
				return err
			}
		}
	}
	answered := map[string]int{} // call id: the result's index, -1 while none
	for i := from; i < len(msgs); i++ {
		m := msgs[i]
		for _, tc := range m.ToolCalls {
			answered[tc.ID] = -1
		}
		if m.Role != RoleTool || m.ToolCallID == "" {
			continue
		}
		j, ok := answered[m.ToolCallID]
		if !ok {
			j = answeredBefore(msgs[:from], m.ToolCallID)
		}
		if j >= 0 {
			return Errorf(EINVALID, "messages[%d].tool_call_id: call %q is answered by messages[%d] already; send one result per call", i, m.ToolCallID, j)
		}
		answered[m.ToolCallID] = i
	}
	return nil
}

// answeredBefore answers the index of the result with the call id that
// follows the latest call with it in msgs (-1: none).
func answeredBefore(msgs []*Message, id string) int {
	for j := len(msgs) - 1; j >= 0; j-- {
		m := msgs[j]
		if slices.ContainsFunc(m.ToolCalls, func(tc ToolCall) bool { return tc.ID == id }) {
			return -1
		}
		if m.Role == RoleTool && m.ToolCallID == id {
			return j
		}
	}
	return -1
}

// answerLookback bounds how far back a write's tool result is checked
// against the session: a call is answered within a few messages, and the
// check must not grow with the session.
const answerLookback = 256

// checkAnsweredBefore refuses a result of this write for a call the session
// answered in an earlier write (ValidateMessages checks within the write):
// both results would stand in every window. The newest stored call or
// result with the id decides, so ids a model numbers again on every turn
// pass; a result whose call is older than the lookback is left to the
// window, which never sends a second result for one call.
func checkAnsweredBefore(tx SessionTx, add []*Message) error {
	pending := map[string]bool{} // call ids of results no call of this write answers
	called := map[string]bool{}
	for _, m := range add {
		for _, tc := range m.ToolCalls {
			called[tc.ID] = true
		}
		if m.Role == RoleTool && m.ToolCallID != "" && !called[m.ToolCallID] {
			pending[m.ToolCallID] = true
		}
	}
	before := uint64(0)
	for seen := 0; len(pending) > 0 && seen < answerLookback; {
		page, err := tx.Messages(MessageQuery{Desc: true, BeforeSeq: before, Limit: 32})
		if err != nil {
			return err
		}
		for _, m := range page {
			for _, tc := range m.ToolCalls {
				delete(pending, tc.ID) // the newest with this id is a call: the result answers it
			}
			if m.Role == RoleTool {
				if pending[m.ToolCallID] {
					return Errorf(EINVALID, "tool_call_id: call %q is answered by stored message %s already; send one result per call", m.ToolCallID, m.ID)
				}
			}
			before = m.Seq
		}
		seen += len(page)
		if len(page) < 32 {
			break
		}
	}
	return nil
}

// knownClientIDs looks up the client ids of msgs the session holds already,
// so their messages are neither counted nor embedded again.
func (s *Service) knownClientIDs(ctx context.Context, tenant, sessionID string, msgs []*Message) (map[string]*Message, error) {
	var ids []string
	for _, m := range msgs {
		if m.ClientID != "" {
			ids = append(ids, m.ClientID)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return s.Store.MessagesByClientID(ctx, tenant, sessionID, ids)
}

// appendTx stores the messages of a write in tx, in order, each with a
// client id the session holds already answered by the stored message, and
// fills res's ids and tokens. known are the messages found before the
// write was prepared (they were not counted or embedded).
func (s *Service) appendTx(tx SessionTx, msgs []*Message, known map[string]*Message, res *AppendResult) error {
	var add []*Message
	pinned := 0
	for _, m := range msgs {
		if m.ClientID != "" {
			have, err := tx.MessageByClientID(m.ClientID)
			if err != nil {
				return err
			}
			if have != nil {
				res.IDs, res.Tokens = append(res.IDs, have.ID), append(res.Tokens, have.Tokens)
				continue
			}
			if known[m.ClientID] != nil {
				return Errorf(ECONFLICT, "message_id %q: its message was deleted while this write ran; send the write again", m.ClientID)
			}
		}
		res.IDs, res.Tokens = append(res.IDs, m.ID), append(res.Tokens, m.Tokens)
		add = append(add, m)
		pinned += PinnedCost(m)
	}
	if err := s.checkPinned(tx, pinned); err != nil {
		return err
	}
	if err := checkAnsweredBefore(tx, add); err != nil {
		return err
	}
	sess := tx.Session()
	for _, m := range add {
		if err := tx.Append(m); err != nil {
			return err
		}
		if m.CreatedAt.After(sess.UpdatedAt) {
			sess.UpdatedAt = m.CreatedAt
		}
	}
	if sess.CompactHold > 0 && s.policy(sess).holdAfter(sess) == 0 {
		sess.CompactHold = 0 // under the trigger again (deletes, pruning): the next crossing compacts
	}
	return nil
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
func (s *Service) afterAppend(ctx context.Context, tenant, sessionID string, sess *Session, untold bool) (*Status, *CompactionReport) {
	st := s.status(sess)
	var rep *CompactionReport
	told := sess.FlushTold == sess.Compactions+1
	held := st.State == WindowCompactionDue && st.Policy.compactHeld(sess, st.Tokens)
	if st.State == WindowOverLimit || (st.State == WindowCompactionDue && !held) {
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
	if st.FlushPrompt != "" && !untold {
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
	if err := countTokens(ctx, s.Tokenizer, enc, msgs); err != nil {
		return err
	}
	caps := toolCaps(msgs, int(pol.ToolResultMaxPct*float64(window)))
	for i, m := range msgs {
		if err := ctx.Err(); err != nil {
			return err
		}
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
	return s.listMessages(ctx, sessionID, states, cursor, limit, false)
}

// listMessages is ListMessages, newest first when desc (the cursor then
// pages toward older messages).
func (s *Service) listMessages(ctx context.Context, sessionID string, states []string, cursor string, limit int, desc bool) ([]*Message, string, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, "", err
	}
	limit, err := pageSize(limit)
	if err != nil {
		return nil, "", err
	}
	q := MessageQuery{Limit: limit + 1, Desc: desc}
	if q.States, err = ParseStates(states); err != nil {
		return nil, "", err
	}
	if cursor != "" {
		seq, err := strconv.ParseUint(cursor, 10, 64)
		if err != nil || (desc && seq == 0) {
			return nil, "", Errorf(EINVALID, "cursor: not a cursor this server gave out")
		}
		if desc {
			q.BeforeSeq = seq
		} else {
			q.AfterSeq = seq
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
	// after the cursor: a page may come out short, never skip a message
	return s.unexpired(msgs), next, nil
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
