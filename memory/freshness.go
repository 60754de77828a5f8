package memory

import (
	"context"
	"time"
)

// Read-your-writes across nodes. A node that shares its store with other
// nodes (PostgreSQL) learns of their writes only through the store's change
// feed: its index, which search and the window's recovery of cold messages
// read, lags until it replays them. With SharedStore set, those reads first
// bring the index up to the store's newest change, waiting at most
// CatchUpWait; past it they answer EUNAVAILABLE (503 with Retry-After), and
// the catch-up goes on in the background for the retry. An embedded store
// has one writer, which syncs its index before it answers a write, so the
// check is off there.

// DefaultCatchUpWait bounds a read's wait for the index to catch up.
const DefaultCatchUpWait = 2 * time.Second

// catchUp returns once the index holds every change the store had when it
// was called; EUNAVAILABLE after CatchUpWait. sessions are the caller's
// sessions the read searches (none: all of them); while a new node builds
// its index (indexbuild.go) those are indexed first, and a read of more
// than scopedSearchSessions, or of all, is refused: its answer would miss
// what the build has not reached.
func (s *Service) catchUp(ctx context.Context, sessions []string) error {
	if !s.SharedStore {
		s.syncPending(ctx, TenantFromContext(ctx), sessions)
		return nil
	}
	building := s.ix.building.Load()
	if building && (len(sessions) == 0 || len(sessions) > scopedSearchSessions) {
		return Errorf(EUNAVAILABLE, "this node is building its search index (%s); a search across more than %d sessions answers once it is built: retry, or name the sessions",
			s.ix.buildProgress(), scopedSearchSessions)
	}
	last, err := s.Store.LastSeq(ctx)
	if err != nil {
		return err
	}
	if !building && s.ix.watermark.Load() >= last {
		return nil
	}
	tenant := TenantFromContext(ctx)
	wait := s.CatchUpWait
	if wait <= 0 {
		wait = DefaultCatchUpWait
	}
	done := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		done <- s.ix.syncSessions(context.WithoutCancel(ctx), last, tenant, sessions)
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return Errorf(EUNAVAILABLE, "this node's search index is still catching up with %d changes other nodes wrote: retry", last-s.ix.watermark.Load())
	case <-ctx.Done():
		return Errorf(EUNAVAILABLE, "request cancelled while the index caught up: %v", ctx.Err())
	}
}
