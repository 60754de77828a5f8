package index

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"

	"github.com/ctxd/ctxd/memory"
)

// The vector side is rebuilt from the store at every start: at 1M messages
// that read took most of a minute before the server answered. It now loads
// while the server serves (memory.VectorLoader): writes go on, and only a
// search that needs vectors waits for the load, so its answer is the one a
// fully loaded index gives.
//
// A write applied during the load is newer than the load's snapshot of the
// store, or as new: the load skips the messages a write touched and the
// sessions one deleted (a deleted session's messages in the snapshot are
// gone; a new one's came through Apply).

// vectorLoad is the state of a load in progress; nil fields when none is.
type vectorLoad struct {
	mu      sync.Mutex
	done    chan struct{} // closed when the load ends; nil: no load began
	err     error         // why the load failed, once done
	touched map[string]bool
	dropped map[collKey]bool
}

// BeginVectorLoad starts a load: from now until EndVectorLoad, vector
// searches wait and LoadVectors gives way to Apply. Call it before the first
// Apply after Open, and only once.
func (x *Index) BeginVectorLoad() {
	x.applyMu.Lock()
	defer x.applyMu.Unlock()
	l := &x.load
	l.mu.Lock()
	defer l.mu.Unlock()
	l.done = make(chan struct{})
	l.touched, l.dropped = map[string]bool{}, map[collKey]bool{}
}

// EndVectorLoad ends the load BeginVectorLoad began. With err, vector
// searches fail with it from now on: the vector side is incomplete.
func (x *Index) EndVectorLoad(err error) {
	x.applyMu.Lock()
	defer x.applyMu.Unlock()
	l := &x.load
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done == nil {
		return
	}
	select {
	case <-l.done:
		return
	default:
	}
	l.err = err
	l.touched, l.dropped = nil, nil
	close(l.done)
	// The load decoded every vector record into a message first: about as
	// much garbage as the rows it kept, which the runtime would hand back
	// to the system only slowly (at 300k messages, 240 MB resident for 100
	// MB of live heap). Once, at the end of a load, a collection is cheap;
	// not under applyMu, which writes wait on.
	go debug.FreeOSMemory()
}

// note records what b changes, while a load is in progress. Callers hold
// applyMu.
func (l *vectorLoad) note(b memory.IndexBatch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.touched == nil {
		return
	}
	for _, s := range b.DeleteSessions {
		l.dropped[collKey{s.Tenant, s.ID}] = true
	}
	for _, m := range b.Deletes {
		l.touched[m.ID] = true
	}
	for _, m := range b.Upserts {
		l.touched[m.ID] = true
	}
}

// stale drops from msgs what a write changed since the load began. Callers
// hold applyMu.
func (l *vectorLoad) stale(msgs []*memory.Message) []*memory.Message {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.touched) == 0 && len(l.dropped) == 0 {
		return msgs
	}
	fresh := make([]*memory.Message, 0, len(msgs))
	for _, m := range msgs {
		if !l.touched[m.ID] && !l.dropped[collKey{m.Tenant, m.SessionID}] {
			fresh = append(fresh, m)
		}
	}
	return fresh
}

// wait returns once no load is in progress, with the error of one that
// failed.
func (l *vectorLoad) wait(ctx context.Context) error {
	l.mu.Lock()
	done := l.done
	l.mu.Unlock()
	if done == nil {
		return nil
	}
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("wait for the vectors to load: %w", ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return memory.Errorf(memory.EUNAVAILABLE, "vector search: the vectors did not load: %v", l.err)
	}
	return nil
}
