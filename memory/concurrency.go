package memory

import (
	"context"
	"hash/fnv"
)

// What runs at once: bounds on heavy work (compactions, embedding calls)
// and the per-session locks that serialise a session's compactions and
// recoveries.

// Concurrency bounds work that is heavy on CPU or on a remote model, so a
// burst of requests queues instead of overloading the machine or the
// embedding endpoint.
type Concurrency struct {
	Compactions int // compactions running at once, across sessions
	Embeds      int // Embedder.Embed calls running at once
}

// DefaultConcurrency suits a small machine: compaction is CPU-bound.
var DefaultConcurrency = Concurrency{Compactions: 2, Embeds: 4}

// semaphore admits up to cap(s) holders.
type semaphore chan struct{}

// acquire waits for a slot or for ctx to end, ctx's Waiter told while it
// waits. A nil semaphore (a Service not opened) admits everyone.
func (s semaphore) acquire(ctx context.Context) error {
	if s == nil {
		return ctx.Err()
	}
	select {
	case s <- struct{}{}:
		return nil
	default:
	}
	defer waiting(ctx)()
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// A Waiter is told when a request's work waits for another's (a session's
// lock, a turn to compact or embed) and when it goes on: the HTTP server
// lets go of the request's place among those working meanwhile, so that
// requests queued behind a session's compaction keep no other session's
// request waiting.
type Waiter interface {
	// Wait is called before the request waits; the function it returns,
	// when the wait is over. That function must not block: the request
	// may hold a session's lock by then.
	Wait() (resume func())
}

type waiterKey struct{}

// NewContextWithWaiter returns a context whose waits w is told of.
func NewContextWithWaiter(ctx context.Context, w Waiter) context.Context {
	return context.WithValue(ctx, waiterKey{}, w)
}

// waiting tells ctx's Waiter, if any, that the request waits now; call
// what it returns when the wait is over.
func waiting(ctx context.Context) (resume func()) {
	if w, ok := ctx.Value(waiterKey{}).(Waiter); ok {
		return w.Wait()
	}
	return func() {}
}

func (s semaphore) release() {
	if s != nil {
		<-s
	}
}

// embed calls the embedder within the embedding bound.
func (s *Service) embed(ctx context.Context, texts []string) ([][]float32, error) {
	if err := s.embedSem.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.embedSem.release()
	return s.Embedder.Embed(ctx, texts)
}

// lockSession serialises compactions (and recoveries) of one session. The
// locks are striped by a hash of the session: a fixed set, however many
// session ids callers invent (a lock per id would grow without bound).
// Two sessions share a stripe 1 time in len(sessionLocks); no caller holds
// two sessions' locks at once, so sharing cannot deadlock.
// While it waits for the lock, ctx's Waiter is told.
func (s *Service) lockSession(ctx context.Context, tenant, id string) func() {
	mu := &s.sessionLocks[stripe(tenant, id, len(s.sessionLocks))]
	if !mu.TryLock() {
		resume := waiting(ctx)
		mu.Lock()
		resume()
	}
	return mu.Unlock
}

// stripe is the lock of n that a session's id hashes to.
func stripe(tenant, id string, n int) uint32 {
	h := fnv.New32a()
	h.Write([]byte(tenant))
	h.Write([]byte{0})
	h.Write([]byte(id))
	return h.Sum32() % uint32(n)
}
