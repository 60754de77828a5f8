package memory

import "context"

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

// acquire waits for a slot or for ctx to end. A nil semaphore (a Service
// not opened) admits everyone.
func (s semaphore) acquire(ctx context.Context) error {
	if s == nil {
		return ctx.Err()
	}
	select {
	case s <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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
