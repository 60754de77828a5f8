package memory

import (
	"context"
	"fmt"
	"sync"
)

// mirrorHealth remembers that the cold mirror could not be written. The
// store commits a compaction (or an edit, a purge, a session's delete)
// before the mirror is written, so a mirror write that fails cannot undo
// it; with the mirror unwritable (a full or read-only volume, wrong
// permissions) compactions were acknowledged without their cold copy while
// /readyz said 200. Now readiness says so until the mirror is whole again:
// the maintain loop retries, writing what is missing from the store
// (reconcileCold) and removing the files of sessions deleted meanwhile.
type mirrorHealth struct {
	mu      sync.Mutex
	failure error               // the last failure; nil: the mirror is whole
	remove  map[sessionKey]bool // deleted sessions whose file is still there
}

// mirrorFailed records a failed mirror write (what: what was being written).
func (s *Service) mirrorFailed(what string, err error) {
	s.Logger.Error("cold mirror write failed; not ready until it is whole again", "what", what, "err", err)
	s.mirror.mu.Lock()
	s.mirror.failure = fmt.Errorf("%s: %w", what, err)
	s.mirror.mu.Unlock()
}

// mirrorRemoveLater records a deleted session whose mirror file could not
// be removed: the maintain loop removes it.
func (s *Service) mirrorRemoveLater(tenant, id string, err error) {
	s.mirror.mu.Lock()
	if s.mirror.remove == nil {
		s.mirror.remove = map[sessionKey]bool{}
	}
	s.mirror.remove[sessionKey{tenant, id}] = true
	s.mirror.mu.Unlock()
	s.mirrorFailed("remove the cold mirror file of deleted session "+id, err)
}

// mirrorError is why the mirror is not whole, or nil.
func (s *Service) mirrorError() error {
	s.mirror.mu.Lock()
	defer s.mirror.mu.Unlock()
	if s.mirror.failure == nil {
		return nil
	}
	return Errorf(EUNAVAILABLE, "the cold mirror cannot be written (%v): cold originals since are in the store only; "+
		"fix the data dir's cold/ directory (space, permissions), and the server writes what is missing", s.mirror.failure)
}

// retryMirror makes the mirror whole again after a failure: it removes the
// files of sessions deleted meanwhile and writes every file that differs
// from the store. On success readiness is given back.
func (s *Service) retryMirror(ctx context.Context) {
	s.mirror.mu.Lock()
	failed := s.mirror.failure != nil
	var remove []sessionKey
	for k := range s.mirror.remove {
		remove = append(remove, k)
	}
	s.mirror.mu.Unlock()
	if !failed || s.Cold == nil {
		return
	}
	for _, k := range remove {
		if _, err := s.Store.Session(ctx, k.Tenant, k.ID); ErrorCode(err) != ENOTFOUND {
			continue // re-created since: its file is its own now
		}
		if err := s.Cold.Remove(k.Tenant, k.ID); err != nil {
			return
		}
		s.mirror.mu.Lock()
		delete(s.mirror.remove, k)
		s.mirror.mu.Unlock()
	}
	if err := s.reconcileCold(ctx); err != nil {
		return
	}
	s.mirror.mu.Lock()
	if len(s.mirror.remove) == 0 {
		s.mirror.failure = nil
	}
	s.mirror.mu.Unlock()
	s.Logger.Info("cold mirror whole again")
}
