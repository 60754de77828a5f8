package memory

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// A new node on a shared store (PostgreSQL) starts with an empty index and
// a store of, say, 100,000 messages. Replaying the change feed into it took
// 188 s before the node answered; the time is Bleve's (about 30 s of CPU
// at 100,000 messages, however the documents come: reading them all from
// the database takes 2.5 s), so on a busy machine no batching makes the
// wait short. The node answers instead as soon as its vectors are loaded,
// and builds its index in the background, session by session, from the
// sessions' messages as they are then (not from the feed):
//
//   - a request that searches one session (the window's searches, a search
//     naming up to scopedSearchSessions sessions) first indexes those
//     sessions if the build has not reached them, then catches up from the
//     feed as any read does: its answer holds every acknowledged message;
//   - a search across the tenant's sessions answers 503 with Retry-After
//     until the build is done: it cannot be complete before.
//
// The build reads a session and applies it under the indexer's lock, the
// same lock the feed's replay takes, so a document always comes from a
// read later than any other applied before it: the index never goes back
// to an older state of a message. The feed's position is taken before the
// build reads anything; every change after it is replayed, so a message
// the build read before its change is indexed again after.
//
// While the build runs the index's persisted watermark stays 0, so it is
// never taken for one that holds what it has not built, and nothing trims
// the feed past it. A node stopped mid-build finds at its next start an
// index of some documents at watermark 0, and builds again in the
// background, as a new node does (replaying the feed from its first
// change, or rebuilding the whole index, before it answered took as long
// as the first start). The documents it holds may be of messages deleted
// since it stopped, which neither the build (which writes what the store
// has) nor the feed (read from the build's start) would remove: the
// build's last slice deletes the documents of messages it did not read
// and the store no longer has.

// buildBatch is how many messages one step of the build indexes while it
// holds the indexer's lock, in slices of buildSlice (one index batch each).
// Between two slices the step gives the lock up to any request waiting to
// index its own sessions (priority): a request waits for one slice, not
// for a step. With steps of 1,000 messages in one batch, a request could
// wait past CatchUpWait on a busy machine and get 503. Variables so that
// tests can take smaller steps.
var (
	buildBatch = ChangeBatch
	buildSlice = 200
)

// beforeBuildStep runs before each step of the background build, and
// beforeBuildSlice before each slice, holding the lock; tests hold the
// build there.
var (
	beforeBuildStep  = func() {}
	beforeBuildSlice = func() {}
)

// priority counts the requests that wait for the indexer's lock to index
// their sessions during the build; the build lets them go first. It waits
// for as many to leave as had come when it started waiting, not for none
// to wait: a steady stream of requests does not stall the build.
type priority struct {
	mu      sync.Mutex
	left    *sync.Cond // signalled when a request leaves
	entered uint64
	done    uint64
}

// onPriorityWait runs when a request starts waiting (tests).
var onPriorityWait = func() {}

func (p *priority) enter() {
	p.mu.Lock()
	p.entered++
	p.mu.Unlock()
	onPriorityWait()
}

func (p *priority) leave() {
	p.mu.Lock()
	p.done++
	if p.left != nil {
		p.left.Broadcast()
	}
	p.mu.Unlock()
}

func (p *priority) waiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entered > p.done
}

// await returns once as many requests left as had come by its call.
func (p *priority) await() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.left == nil {
		p.left = sync.NewCond(&p.mu)
	}
	for until := p.entered; p.done < until; {
		p.left.Wait()
	}
}

// buildState is the background build's progress. Its fields are guarded by
// the indexer's mu; building is also read without it.
type buildState struct {
	// seen are the ids of the messages the build indexed, when the index
	// held documents before it (see sweep); nil for a new index.
	seen     map[string]bool
	built    map[sessionKey]bool // sessions whose every message is indexed
	sessions []sessionKey        // the sessions to build, in order
	next     int                 // sessions[next] is the one being built
	after    uint64              // its messages up to this seq are indexed
}

// persistedWM is the watermark written with a batch: 0 while the build
// runs (see above).
func (ix *indexer) persistedWM(seq uint64) uint64 {
	if ix.building.Load() {
		return 0
	}
	return seq
}

// toBuild reports whether the index is to be built in the background: a
// new one (no watermark, no documents) or one whose build a stopped node
// left unfinished (no watermark, some documents: resumed), while the
// store holds changes.
func (ix *indexer) toBuild(wm, last uint64) (build, resumed bool, err error) {
	if !ix.background || wm != 0 || last == 0 {
		return false, false, nil
	}
	docs, _, err := ix.index.Count()
	if err != nil {
		return false, false, fmt.Errorf("count index documents: %w", err)
	}
	return true, docs > 0, nil
}

// startBuild makes the index answer from change last on, with the
// build to come: sessions are indexed by build or on demand. resumed: the
// index holds documents of an unfinished build, to sweep at the end.
func (ix *indexer) startBuild(ctx context.Context, last uint64, resumed bool) error {
	var b buildState
	if resumed {
		b.seen = map[string]bool{}
	}
	var total int64
	err := VisitSessions(ctx, ix.store, func(s *Session) error {
		b.sessions = append(b.sessions, sessionKey{s.Tenant, s.ID})
		c := s.Counts
		total += int64(c.Active + c.Summarized + c.Dropped + c.Recovered)
		return nil
	})
	if err != nil {
		return fmt.Errorf("list sessions to index: %w", err)
	}
	b.built = make(map[sessionKey]bool, len(b.sessions))
	ix.mu.Lock()
	ix.build = &b
	ix.buildIndexed.Store(0)
	ix.buildTotal.Store(total)
	ix.building.Store(true)
	ix.watermark.Store(last)
	ix.mu.Unlock()
	ix.log.Info("answering while the index is built in the background", "sessions", len(b.sessions), "messages", total, "from_change", last, "resumed", resumed)
	return nil
}

// runBuild builds the index in the background until it is whole; a
// failing step (the database restarting) is retried.
func (s *Service) runBuild(ctx context.Context) {
	ix := s.ix
	start := time.Now()
	for {
		beforeBuildStep()
		done, err := ix.buildStep(ctx)
		if err == nil && done {
			ix.log.Info("index built", "messages", ix.buildIndexed.Load(), "took", time.Since(start).Round(time.Millisecond))
			return
		}
		if err != nil {
			ix.log.Error("index build step failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(DefaultMaintainInterval):
			}
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// buildStep indexes up to buildBatch messages of the sessions not yet
// built, a slice at a time, and ends the build after the last: its final
// slice writes the watermark. It returns early, giving the lock up, when a
// request waits to index its own sessions.
func (ix *indexer) buildStep(ctx context.Context) (bool, error) {
	ix.prio.await()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	for n := 0; ix.build != nil && n < buildBatch; {
		if n > 0 && ix.prio.waiting() {
			return false, nil
		}
		beforeBuildSlice()
		k, err := ix.buildSliceLocked(ctx)
		if err != nil {
			return false, err
		}
		n += k
	}
	return ix.build == nil, nil
}

// buildSliceLocked indexes up to buildSlice messages of the sessions not
// yet built, in one batch, and says how many. Callers hold mu.
func (ix *indexer) buildSliceLocked(ctx context.Context) (int, error) {
	b := ix.build
	var batch []*Message
	var finished []sessionKey
	for len(batch) < buildSlice && b.next < len(b.sessions) {
		k := b.sessions[b.next]
		if b.built[k] {
			b.next, b.after = b.next+1, 0
			continue
		}
		want := buildSlice - len(batch)
		msgs, err := ix.store.Messages(ctx, k.Tenant, k.ID, MessageQuery{AfterSeq: b.after, Limit: want, Vectors: true})
		if err != nil && ErrorCode(err) != ENOTFOUND { // deleted since: the feed deletes it
			return 0, fmt.Errorf("read session %s to index: %w", k.ID, err)
		}
		batch = append(batch, msgs...)
		if len(msgs) < want {
			finished = append(finished, k)
			b.next, b.after = b.next+1, 0
		} else {
			b.after = msgs[len(msgs)-1].Seq
		}
	}
	b.saw(batch)
	last := b.next >= len(b.sessions)
	ib := IndexBatch{Upserts: batch}
	if last {
		ib.Watermark = ix.watermark.Load()
		var err error
		if ib.Deletes, err = ix.sweep(ctx, b); err != nil {
			return 0, err
		}
	}
	if err := ix.index.Apply(ctx, ib); err != nil {
		return 0, fmt.Errorf("index %d messages: %w", len(batch), err)
	}
	for _, k := range finished {
		b.built[k] = true
	}
	n := ix.buildIndexed.Add(int64(len(batch)))
	if last {
		ix.building.Store(false)
		ix.build = nil
		return len(batch), nil
	}
	if n/10_000 != (n-int64(len(batch)))/10_000 {
		ix.log.Info("building index", "indexed", n, "of", ix.buildTotal.Load())
	}
	return len(batch), nil
}

// buildSessions indexes the named sessions of tenant the build has not
// reached. Callers hold mu.
func (ix *indexer) buildSessions(ctx context.Context, tenant string, ids []string) error {
	b := ix.build
	if b == nil {
		return nil
	}
	for _, id := range ids {
		k := sessionKey{tenant, id}
		if b.built[k] {
			continue
		}
		var after uint64
		for {
			msgs, err := ix.store.Messages(ctx, tenant, id, MessageQuery{AfterSeq: after, Limit: ChangeBatch, Vectors: true})
			if ErrorCode(err) == ENOTFOUND {
				break // a new session: the feed holds all of it
			}
			if err != nil {
				return fmt.Errorf("read session %s to index: %w", id, err)
			}
			if err := ix.index.Apply(ctx, IndexBatch{Upserts: msgs, Watermark: 0}); err != nil {
				return fmt.Errorf("index session %s: %w", id, err)
			}
			b.saw(msgs)
			ix.buildIndexed.Add(int64(len(msgs)))
			if len(msgs) < ChangeBatch {
				break
			}
			after = msgs[len(msgs)-1].Seq
		}
		b.built[k] = true
	}
	return nil
}

// saw records the messages a resumed build indexed.
func (b *buildState) saw(msgs []*Message) {
	if b.seen != nil {
		for _, m := range msgs {
			b.seen[m.ID] = true
		}
	}
}

// sweep returns, for a resumed build's last slice, the documents of
// messages the build did not index and the store no longer has (deleted
// while no build ran). A message the build did not read and the store has
// came through the feed since the build started: it stays. Callers hold
// mu, so no replay adds documents meanwhile.
func (ix *indexer) sweep(ctx context.Context, b *buildState) ([]*Message, error) {
	docs, ok := ix.index.(DocLister)
	if b.seen == nil || !ok {
		return nil, nil
	}
	unseen := map[string][]IndexDoc{} // by tenant
	err := docs.ForEachDoc(ctx, func(d IndexDoc) error {
		if !b.seen[d.ID] {
			unseen[d.Tenant] = append(unseen[d.Tenant], d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list index documents: %w", err)
	}
	var gone []*Message
	for tenant, ds := range unseen {
		ids := make([]string, len(ds))
		for i, d := range ds {
			ids[i] = d.ID
		}
		have, err := ix.store.MessagesByID(ctx, tenant, ids, false)
		if err != nil {
			return nil, fmt.Errorf("read messages to sweep: %w", err)
		}
		kept := make(map[string]bool, len(have))
		for _, m := range have {
			kept[m.ID] = true
		}
		for _, d := range ds {
			if !kept[d.ID] {
				gone = append(gone, &Message{ID: d.ID, Tenant: d.Tenant, SessionID: d.SessionID})
			}
		}
	}
	if len(gone) > 0 {
		ix.log.Info("deleting index documents of messages deleted while the build was stopped", "count", len(gone))
	}
	return gone, nil
}

// buildProgress says how far the build is, for a refusal's message.
func (ix *indexer) buildProgress() string {
	return fmt.Sprintf("%d of %d messages", ix.buildIndexed.Load(), ix.buildTotal.Load())
}
