package memory

import (
	"context"
	"testing"
)

// recordingWaiter reports its waits on a channel and counts resumes.
type recordingWaiter struct {
	waits   chan struct{}
	resumed chan struct{}
}

func (w recordingWaiter) Wait() func() {
	w.waits <- struct{}{}
	return func() { w.resumed <- struct{}{} }
}

// A request that waits for a session's lock, or for a turn to compact,
// tells its Waiter before it waits and after (so the HTTP server lets its
// work slot go meanwhile); one that does not wait tells nothing.
func TestWaiterToldOfWaits(t *testing.T) {
	t.Parallel()
	s := &Service{}
	w := recordingWaiter{waits: make(chan struct{}, 1), resumed: make(chan struct{}, 1)}
	ctx := NewContextWithWaiter(context.Background(), w)

	unlock := s.lockSession(ctx, "t", "s")
	if len(w.waits) != 0 {
		t.Fatal("an uncontended lock told the waiter")
	}
	done := make(chan func())
	go func() { done <- s.lockSession(ctx, "t", "s") }()
	<-w.waits // the second caller waits, and said so
	select {
	case <-w.resumed:
		t.Fatal("resumed before the lock was free")
	default:
	}
	unlock()
	(<-done)()
	<-w.resumed

	sem := make(semaphore, 1)
	if err := sem.acquire(ctx); err != nil {
		t.Fatal(err)
	}
	if len(w.waits) != 0 {
		t.Fatal("a free semaphore told the waiter")
	}
	got := make(chan error)
	go func() { got <- sem.acquire(ctx) }()
	<-w.waits
	sem.release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	<-w.resumed
}
