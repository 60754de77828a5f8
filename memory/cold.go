package memory

// Cold storage as the service sees it: listing a session's cold originals,
// keeping the mirror true after edits, and purging what is past its
// retention. Recovery is in recover.go.

import (
	"context"
	"fmt"
	"slices"
	"time"
)

var coldStates = []State{StateDropped, StateSummarized}

// MirrorStates are the states of the messages a session's mirror file
// holds a line of: see Mirrored.
var MirrorStates = []State{StateDropped, StateSummarized, StateRecovered}

// Mirrored keeps, of msgs (read in MirrorStates), those the mirror file
// must hold a line of when it is rewritten: the messages in a cold state,
// and the recovered originals. A line is written once, when its message
// first goes cold, and a recovered message dropped again writes none: a
// rewrite (an edit or delete of another message, a purge, start-up
// reconciliation, an import) that left out the recovered ones lost their
// line for good, and restore-cold could not bring them back.
func Mirrored(msgs []*Message) []*Message {
	out := msgs[:0]
	for _, m := range msgs {
		if !m.InWindow() || m.Cold != nil {
			out = append(out, m)
		}
	}
	return out
}

// ListCold pages through a session's cold chunks (dropped and summarized
// originals), newest first unless oldestFirst: what went cold last is what
// a person looking for it wants first.
func (s *Service) ListCold(ctx context.Context, sessionID, cursor string, limit int, oldestFirst bool) ([]*Message, string, error) {
	return s.listMessages(ctx, sessionID, []string{string(StateDropped), string(StateSummarized)}, cursor, limit, !oldestFirst)
}

// Cold listing orders (the order parameter).
const (
	OrderNewest = "newest"
	OrderOldest = "oldest"
)

// ParseOrder reads a cold listing's order: newest (the default, also for
// "") or oldest. It reports whether the listing is oldest first.
func ParseOrder(s string) (oldestFirst bool, err error) {
	switch s {
	case "", OrderNewest:
		return false, nil
	case OrderOldest:
		return true, nil
	}
	return false, Errorf(EINVALID, "order: %q is not one of newest, oldest", s)
}

// rewriteColdMirror makes the session's cold mirror match the store.
func (s *Service) rewriteColdMirror(ctx context.Context, tenant, sessionID string) {
	if s.Cold == nil {
		return
	}
	cold, err := s.Store.Messages(ctx, tenant, sessionID, MessageQuery{States: MirrorStates})
	if err == nil {
		err = s.Cold.Rewrite(tenant, sessionID, Mirrored(cold))
	}
	if err != nil {
		s.mirrorFailed("rewrite the cold mirror of session "+sessionID, err)
	}
}

// Purge removes cold chunks past their recoverable_until from the store and
// both indexes, logging each. It returns how many were purged. It runs at
// start, when the earliest retention it saw has passed (see purgeDue), and
// every PurgeInterval: a server restarted more often than that purged
// nothing before, and expired originals stayed readable and recoverable.
func (s *Service) Purge(ctx context.Context, now time.Time) (int, error) {
	purged := 0
	next := time.Time{}
	err := s.forEachSession(ctx, func(sess *Session) error {
		if sess.Counts.Dropped+sess.Counts.Summarized == 0 {
			return nil
		}
		unlock := s.lockSession(sess.Tenant, sess.ID)
		defer unlock()
		n, until, err := s.purgeSession(ctx, sess.Tenant, sess.ID, now)
		purged += n
		if !until.IsZero() && (next.IsZero() || until.Before(next)) {
			next = until
		}
		if ErrorCode(err) == EDAMAGED {
			// One damaged record must not stop every other session's
			// purge; verify names it.
			s.Logger.Error("purge skipped a session with a damaged record", "tenant", sess.Tenant, "session", sess.ID, "err", err)
			return nil
		}
		return err
	})
	if purged > 0 {
		s.syncIndex(ctx)
	}
	if err == nil {
		s.nextExpiry.Store(next.UnixNano())
		if next.IsZero() {
			s.nextExpiry.Store(0)
		}
	}
	return purged, err
}

// purgeSession purges one session's expired cold chunks; the caller holds
// the session's lock and brings the index up to date. until is the earliest
// retention of the cold chunks left (zero: none).
func (s *Service) purgeSession(ctx context.Context, tenant, id string, now time.Time) (int, time.Time, error) {
	var gone []*Message
	var until time.Time
	_, err := s.Store.Update(ctx, tenant, id, func(tx SessionTx) error {
		gone, until = gone[:0], time.Time{}
		cold, err := tx.Messages(MessageQuery{States: coldStates})
		if err != nil {
			return err
		}
		for _, m := range cold {
			if m.Cold == nil {
				continue
			}
			if m.Cold.RecoverableUntil.After(now) {
				if until.IsZero() || m.Cold.RecoverableUntil.Before(until) {
					until = m.Cold.RecoverableUntil
				}
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
		return 0, until, fmt.Errorf("purge session %s: %w", id, err)
	}
	for _, m := range gone {
		s.event("purges", map[string]any{"tenant": tenant, "session": id, "chunk": m.ID,
			"reason": m.Cold.DropReason, "recoverable_until": m.Cold.RecoverableUntil, "tokens": m.Tokens})
	}
	if len(gone) > 0 {
		s.rewriteColdMirror(ctx, tenant, id)
	}
	return len(gone), until, nil
}

// unexpired leaves out of msgs the cold chunks past their retention: expiry
// holds at read time, not only once a purge has run (a server restarted
// often, or a purge that failed, must not leave them readable, searchable
// or recoverable). msgs is filtered in place.
func (s *Service) unexpired(msgs []*Message) []*Message {
	now := time.Now()
	if s.Now != nil { // a service used without Open
		now = s.Now()
	}
	return slices.DeleteFunc(msgs, func(m *Message) bool { return expired(m, now) })
}

// expired says whether m is a cold chunk past its retention.
func expired(m *Message, now time.Time) bool {
	return m.Cold != nil && slices.Contains(coldStates, m.State) && !m.Cold.RecoverableUntil.After(now)
}

// purgeDue says whether the earliest retention the last purge saw has
// passed. Chunks that went cold since expire no sooner than their
// session's recoverable_for_days, so they are left to the next purge.
func (s *Service) purgeDue(now time.Time) bool {
	next := s.nextExpiry.Load()
	return next != 0 && now.UnixNano() >= next
}
