package memory

import "context"

// Pinned and system messages are always in the window the builder hands
// out, so they have a budget of their own (Policy.PinnedMaxPct): an agent
// that writes a pinned note on every flush prompt would otherwise grow
// them until every context call is refused, with no way back short of
// deleting the session.

// PinnedCost is what m adds to its session's pinned total: the tokens of a
// pinned or system message in the working window. Summaries are the
// server's, never pinned by role.
func PinnedCost(m *Message) int {
	if m.InWindow() && (m.Pinned || m.IsStandingSystem()) {
		return m.Tokens
	}
	return 0
}

// pinnedTotal is the session's pinned total in tx. A session stored before
// the total was kept has none: it is counted from the messages once and
// kept from then on (the store adds every later change to it).
func pinnedTotal(tx SessionTx) (int, error) {
	sess := tx.Session()
	if sess.PinnedTokens != nil {
		return *sess.PinnedTokens, nil
	}
	msgs, err := tx.Messages(MessageQuery{States: []State{StateActive, StateRecovered}})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range msgs {
		n += PinnedCost(m)
	}
	sess.PinnedTokens = &n
	return n, nil
}

// pinnedLimit is the most tokens a session's pinned and system messages
// may take.
func pinnedLimit(pol Policy, sess *Session) int {
	return int(pol.PinnedMaxPct * float64(sess.ContextWindow))
}

// checkPinned refuses, in the write's transaction, a write that adds
// `adds` tokens to the pinned total when that carries it past the limit. A
// write that adds nothing (or frees room) always passes, even in a session
// already over its limit (its window was made smaller): shortening or
// unpinning must stay possible.
func (s *Service) checkPinned(tx SessionTx, adds int) error {
	if adds <= 0 {
		return nil
	}
	total, err := pinnedTotal(tx)
	if err != nil {
		return err
	}
	sess := tx.Session()
	pol := s.policy(sess)
	limit := pinnedLimit(pol, sess)
	if total+adds <= limit {
		return nil
	}
	return Errorf(ECONFLICT, "pinned budget: the pinned and system messages of session %q use %d tokens and this write would add %d, past the limit of %d "+
		"(pinned_max_pct %v of the %d-token context window); nothing was stored. Free room first: unpin notes that need not stay in every window "+
		`(PATCH /v1/messages/{id} with {"pinned": false}), delete those no longer true (DELETE /v1/messages/{id}), or merge them into one shorter note; `+
		"or raise pinned_max_pct with PUT /v1/sessions/%s",
		sess.ID, total, adds, limit, pol.PinnedMaxPct, sess.ContextWindow, sess.ID)
}

// PinnedMessages lists a session's pinned and system messages (not
// summaries), in order: the notes that stay in every window. It reads the
// working window only, which the context budget bounds, however long the
// session is. EINVALID for a bad id, ENOTFOUND for a session the caller
// does not have.
func (s *Service) PinnedMessages(ctx context.Context, sessionID string) ([]*Message, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	if _, err := s.Store.Session(ctx, tenant, sessionID); err != nil {
		return nil, err
	}
	window, err := s.Store.Messages(ctx, tenant, sessionID, MessageQuery{States: []State{StateActive, StateRecovered}})
	if err != nil {
		return nil, err
	}
	var out []*Message
	for _, m := range window {
		if m.Pinned || m.IsStandingSystem() {
			out = append(out, m)
		}
	}
	return out, nil
}
