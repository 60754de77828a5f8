package memory

import (
	"context"
	"time"
)

// PutSession creates a session or changes its settings.
func (s *Service) PutSession(ctx context.Context, id string, u SessionUpdate) (*Status, error) {
	if err := ValidateSessionID(id); err != nil {
		return nil, err
	}
	if err := u.Validate(); err != nil {
		return nil, err
	}
	tenant := TenantFromContext(ctx)
	sess, err := s.Store.UpdateSession(ctx, tenant, id, s.newSession(tenant, id), func(sess *Session) error {
		// Stored token counts are in the old encoding: changing it would make
		// every budget decision wrong.
		if u.Encoding != nil && *u.Encoding != sess.Encoding && sess.Counts.Total() > 0 {
			return Errorf(ECONFLICT, "encoding: session %q holds messages counted in %s; create a new session to use %s", id, sess.Encoding, *u.Encoding)
		}
		u.Apply(sess)
		if err := s.policy(sess).Validate(); err != nil {
			return err
		}
		sess.UpdatedAt = s.Now().UTC()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.status(sess), nil
}

// GetSession returns a session's status.
func (s *Service) GetSession(ctx context.Context, id string) (*Status, error) {
	if err := ValidateSessionID(id); err != nil {
		return nil, err
	}
	sess, err := s.Store.Session(ctx, TenantFromContext(ctx), id)
	if err != nil {
		return nil, err
	}
	return s.status(sess), nil
}

// Page limits for listings.
const (
	DefaultPageSize = 100
	MaxPageSize     = 1000
)

// ListSessions pages through the caller's sessions in id order. The cursor is
// the last id of the previous page.
func (s *Service) ListSessions(ctx context.Context, cursor string, limit int) ([]*Status, string, error) {
	limit, err := pageSize(limit)
	if err != nil {
		return nil, "", err
	}
	if cursor != "" {
		if err := ValidateSessionID(cursor); err != nil {
			return nil, "", Errorf(EINVALID, "cursor: not a cursor this server gave out")
		}
	}
	sessions, err := s.Store.Sessions(ctx, TenantFromContext(ctx), cursor, limit+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(sessions) > limit {
		sessions = sessions[:limit]
		next = sessions[limit-1].ID
	}
	out := make([]*Status, len(sessions))
	for i, sess := range sessions {
		out[i] = s.status(sess)
	}
	return out, next, nil
}

// DeleteSession removes a session from the store, both indexes and the cold
// mirror.
//
// The mirror file goes first, under the session's lock (compactions, edits
// and purges write the mirror under it, so none can bring the file back in
// between): a kill -9 after it leaves a session whose cold lines are
// missing, which start-up writes back (reconcileCold), while the other
// order would leave the deleted content on disk with nothing in the store
// to say it was deleted.
func (s *Service) DeleteSession(ctx context.Context, id string) error {
	if err := ValidateSessionID(id); err != nil {
		return err
	}
	tenant := TenantFromContext(ctx)
	unlock := s.lockSession(ctx, tenant, id)
	defer unlock()
	if _, err := s.Store.Session(ctx, tenant, id); err != nil {
		return err // ENOTFOUND: a mirror file without a session is verify's to judge
	}
	var removeErr error
	if s.Cold != nil {
		removeErr = s.Cold.Remove(tenant, id)
	}
	if err := s.Store.DeleteSession(ctx, tenant, id); err != nil {
		// The session stays: give it its mirror back now rather than at
		// the next start.
		s.rewriteColdMirror(context.WithoutCancel(ctx), tenant, id)
		return err
	}
	if removeErr != nil {
		// An unwritable mirror does not keep a session from being
		// deleted (it answered 500): its file goes once it can, and
		// readiness says it is there meanwhile.
		s.mirrorRemoveLater(tenant, id, removeErr)
	}
	s.syncIndex(ctx)
	return nil
}

func pageSize(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultPageSize, nil
	case limit < 0 || limit > MaxPageSize:
		return 0, Errorf(EINVALID, "limit: %d is outside 1..%d", limit, MaxPageSize)
	}
	return limit, nil
}

// indexLag is how long syncIndexSoon lets changes gather: one index batch
// for the recoveries of several context calls, instead of one small batch
// (and the segment merges it causes) per call.
const indexLag = 200 * time.Millisecond
