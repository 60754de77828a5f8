package memory

import (
	"context"
	"fmt"
	"time"
)

var coldStates = []State{StateDropped, StateSummarized}

// ListCold pages through a session's cold chunks (dropped and summarized
// originals) in order.
func (s *Service) ListCold(ctx context.Context, sessionID, cursor string, limit int) ([]*Message, string, error) {
	return s.ListMessages(ctx, sessionID, []string{string(StateDropped), string(StateSummarized)}, cursor, limit)
}

// Recover puts a dropped or summarized message back into the working window
// as recovered. Recovering an active or recovered message changes nothing.
func (s *Service) Recover(ctx context.Context, sessionID, messageID, prompt string, score float64) (*Message, error) {
	if err := ValidateSessionID(sessionID); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(tenant, sessionID)
	defer unlock()
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

// rewriteColdMirror makes the session's cold mirror match the store.
func (s *Service) rewriteColdMirror(ctx context.Context, tenant, sessionID string) {
	if s.Cold == nil {
		return
	}
	cold, err := s.Store.Messages(ctx, tenant, sessionID, MessageQuery{States: coldStates})
	if err == nil {
		err = s.Cold.Rewrite(tenant, sessionID, cold)
	}
	if err != nil {
		s.Logger.Error("rewrite cold mirror", "session", sessionID, "err", err)
	}
}

// Purge removes cold chunks past their recoverable_until from the store and
// both indexes, logging each. It returns how many were purged.
func (s *Service) Purge(ctx context.Context, now time.Time) (int, error) {
	purged := 0
	err := s.forEachSession(ctx, func(sess *Session) error {
		if sess.Counts.Dropped+sess.Counts.Summarized == 0 {
			return nil
		}
		unlock := s.lockSession(sess.Tenant, sess.ID)
		defer unlock()
		var gone []*Message
		_, err := s.Store.Update(ctx, sess.Tenant, sess.ID, func(tx SessionTx) error {
			gone = gone[:0]
			cold, err := tx.Messages(MessageQuery{States: coldStates})
			if err != nil {
				return err
			}
			for _, m := range cold {
				if m.Cold == nil || m.Cold.RecoverableUntil.After(now) {
					continue
				}
				if err := tx.Delete(m.ID); err != nil {
					return err
				}
				gone = append(gone, m)
			}
			// An edited message no longer lists its purged earlier versions.
			return unlinkDeleted(tx, gone, false)
		})
		if err != nil {
			return fmt.Errorf("purge session %s: %w", sess.ID, err)
		}
		for _, m := range gone {
			s.event("purges", map[string]any{"tenant": sess.Tenant, "session": sess.ID, "chunk": m.ID,
				"reason": m.Cold.DropReason, "recoverable_until": m.Cold.RecoverableUntil, "tokens": m.Tokens})
		}
		if len(gone) > 0 {
			purged += len(gone)
			s.rewriteColdMirror(ctx, sess.Tenant, sess.ID)
		}
		return nil
	})
	if purged > 0 {
		s.syncIndex(ctx)
	}
	return purged, err
}

// forEachSession visits every session of every tenant.
func (s *Service) forEachSession(ctx context.Context, fn func(*Session) error) error {
	return visitSessions(ctx, s.Store, fn)
}

// visitSessions visits every session of every tenant, by tenant then id.
func visitSessions(ctx context.Context, st Store, fn func(*Session) error) error {
	tenants, err := st.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range tenants {
		after := ""
		for {
			page, err := st.Sessions(ctx, t, after, 500)
			if err != nil {
				return err
			}
			for _, sess := range page {
				if err := fn(sess); err != nil {
					return err
				}
			}
			if len(page) < 500 {
				break
			}
			after = page[len(page)-1].ID
		}
	}
	return nil
}
