package memory

// The session's running totals are the domain's arithmetic, not a
// backend's: every Store keeps them with the same two calls inside the
// write's transaction (Place for a new message, Account for each message
// that comes, goes or changes), so two backends cannot disagree about a
// session's tokens, counts or turns.

// Place gives a new message of the session its seq and assistant turn, and
// its tenant and session.
func (s *Session) Place(m *Message) {
	s.LastSeq++
	m.Tenant, m.SessionID, m.Seq = s.Tenant, s.ID, s.LastSeq
	m.Turn = s.AssistantTurns
	if m.Role == RoleAssistant {
		s.AssistantTurns++
	}
}

// Replace accounts for m taking the place of old, its stored version: m
// keeps old's tenant, session and seq, and its vector when m has none.
func (s *Session) Replace(old, m *Message) {
	m.Tenant, m.SessionID, m.Seq = old.Tenant, old.SessionID, old.Seq
	if m.Vector == nil {
		m.Vector = old.Vector
	}
	s.Account(old, -1)
	s.Account(m, +1)
}

// Account adds (sign +1) or removes (-1) a message's share of the session's
// counters: counts by state, window tokens, summaries, pinned tokens and
// the prunable tool results. A changed message is removed as it was and
// added as it is.
func (s *Session) Account(m *Message, sign int) {
	s.Counts.Add(m.State, sign)
	if m.InWindow() {
		s.Tokens += sign * m.Tokens
	}
	if m.IsSummary() {
		s.Summaries += sign
	}
	if s.PinnedTokens != nil {
		*s.PinnedTokens += sign * PinnedCost(m)
	}
	if m.Prune == nil {
		return
	}
	if sign < 0 {
		delete(s.Prunable, m.ID)
	} else if m.InWindow() {
		if s.Prunable == nil {
			s.Prunable = map[string]PruneEntry{}
		}
		s.Prunable[m.ID] = PruneEntry{Turn: m.Turn, Full: m.Tokens, Trimmed: m.Prune.Trimmed, Cleared: m.Prune.Cleared, Cut: m.Prune.Cut}
	}
}

// Imported is sess with its counters recomputed from msgs, the messages an
// import restores with their own ids and seqs: counters are derived data,
// so an import cannot bring in totals that disagree with its messages.
// EINVALID for a message of another session, an empty id, or a seq
// missing or repeated.
func Imported(sess *Session, msgs []*Message) (*Session, error) {
	out := *sess
	out.Counts, out.Tokens, out.Summaries, out.Prunable, out.LastSeq = Counts{}, 0, 0, nil, 0
	var pinned int
	out.PinnedTokens = &pinned
	seen := make(map[uint64]bool, len(msgs))
	for _, m := range msgs {
		if m.Tenant != sess.Tenant || m.SessionID != sess.ID {
			return nil, Errorf(EINVALID, "message %s belongs to %q/%q, not %q/%q", m.ID, m.Tenant, m.SessionID, sess.Tenant, sess.ID)
		}
		if m.ID == "" || m.Seq == 0 || seen[m.Seq] {
			return nil, Errorf(EINVALID, "message %q of session %s: empty id, or seq %d missing or repeated", m.ID, sess.ID, m.Seq)
		}
		seen[m.Seq] = true
		out.LastSeq = max(out.LastSeq, m.Seq)
		out.Account(m, +1)
	}
	return &out, nil
}
