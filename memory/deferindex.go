package memory

import (
	"context"
	"sync"
	"time"
)

// maxDeferredChanges and maxDeferredBytes (of content) bound how far
// appends let the index fall behind the store (deferIndex): past them an
// append waits for the index, so writers faster than indexing are slowed
// down instead of piling up lag, and one catch-up does not read and
// analyze more than that at once (8 concurrent writes of 8 MB, each
// indexed with the others, took the peak RSS over the README's bound).
const (
	maxDeferredChanges = 2 * ChangeBatch
	maxDeferredBytes   = 4 << 20
)

// messageBytes is the size of msgs' content and tool calls, as indexed.
func messageBytes(msgs []*Message) int {
	n := 0
	for _, m := range msgs {
		n += len(m.Content)
		for _, tc := range m.ToolCalls {
			n += len(tc.Function.Name) + len(tc.Function.Arguments)
		}
	}
	return n
}

// deferIndex is syncIndex for an append on the embedded store: the write is
// durable in the store, so the index may take it in the background with the
// next writes, as one larger batch (Bleve's CPU per message fell by 40% from
// batches of 100 to 1,000). Read-your-writes holds through syncPending:
// a read of the index (search, context, compaction's scores) first catches
// up with the writes answered so far to the sessions it reads. A shared
// store keeps syncIndex: its reads catch up with the store (catchUp).
func (s *Service) deferIndex(ctx context.Context, tenant, sessionID string, bytes int) {
	if s.SharedStore || bytes > maxDeferredBytes {
		s.syncIndex(ctx)
		return
	}
	last, err := s.Store.LastSeq(ctx)
	wm := s.ix.watermark.Load()
	if err != nil || last > wm+maxDeferredChanges || !s.ix.pending.note(tenant, sessionID, last, wm, bytes) {
		s.syncIndex(ctx)
		return
	}
	s.syncIndexAfter(deferLag)
}

// deferLag is how long deferred appends gather before the background
// catch-up indexes them: about a batch of ChangeBatch at 1,000 messages a
// second (Bleve's cost per message: batches of 100, 18.3 s for 40,000
// messages; of 200, 14.5 s; of 1,000, 10.7 s).
const deferLag = time.Second

// syncPending brings the index up to every write deferIndex answered to the
// tenant's sessions (none: all of them), so that a read of them sees those
// writes. A failure is logged, as syncIndex does: the read answers from the
// index as it is, and /readyz reports the lag.
func (s *Service) syncPending(ctx context.Context, tenant string, sessions []string) {
	seq := s.ix.pending.last(tenant, sessions)
	if s.ix.watermark.Load() >= seq {
		return
	}
	if err := s.ix.sync(context.WithoutCancel(ctx), seq); err != nil {
		s.Logger.Error("index catch-up before a read failed", "err", err)
	}
}

// pendingWrites remembers the last change of each session, and of each
// tenant, that deferIndex answered: a read of one session waits only for
// that session's writes, not for the other sessions' ingest.
type pendingWrites struct {
	mu        sync.Mutex
	bySession map[SessionRef]uint64
	byTenant  map[string]uint64
	queue     []deferredWrite // in seq order, the index may not hold them
	bytes     int             // their sum
}

type deferredWrite struct {
	seq   uint64
	bytes int
}

// pendingPrune is how many sessions pendingWrites holds before it drops
// those the index has caught up with.
const pendingPrune = 4096

// note records a deferred write of bytes whose last change is seq, unless
// the writes the index may not hold yet (past watermark) would then be over
// maxDeferredBytes: false, and the caller indexes now.
func (p *pendingWrites) note(tenant, sessionID string, seq, watermark uint64, bytes int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	drop := 0
	for drop < len(p.queue) && p.queue[drop].seq <= watermark {
		p.bytes -= p.queue[drop].bytes
		drop++
	}
	p.queue = p.queue[drop:]
	if p.bytes+bytes > maxDeferredBytes {
		return false
	}
	p.queue = append(p.queue, deferredWrite{seq, bytes})
	p.bytes += bytes
	if p.bySession == nil {
		p.bySession, p.byTenant = map[SessionRef]uint64{}, map[string]uint64{}
	}
	if len(p.bySession) >= pendingPrune {
		for k, v := range p.bySession {
			if v <= watermark {
				delete(p.bySession, k)
			}
		}
		for k, v := range p.byTenant {
			if v <= watermark {
				delete(p.byTenant, k)
			}
		}
	}
	k := SessionRef{tenant, sessionID}
	p.bySession[k] = max(p.bySession[k], seq)
	p.byTenant[tenant] = max(p.byTenant[tenant], seq)
	return true
}

// last is the change the index must hold for a read of the tenant's
// sessions (none: all of them) to see every write answered to them.
func (p *pendingWrites) last(tenant string, sessions []string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(sessions) == 0 {
		return p.byTenant[tenant]
	}
	var seq uint64
	for _, id := range sessions {
		seq = max(seq, p.bySession[SessionRef{tenant, id}])
	}
	return seq
}
