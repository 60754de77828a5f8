package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// gatedIndex holds every index update until its gate opens: an index that
// is slow to catch up with other nodes' writes.
type gatedIndex struct {
	memory.Index
	gate chan struct{}
}

func (g *gatedIndex) Apply(ctx context.Context, b memory.IndexBatch) error {
	<-g.gate
	return g.Index.Apply(ctx, b)
}

// With a shared store, a search waits for the node's index to hold the
// store's newest change, at most CatchUpWait, then answers unavailable (the
// API's 503 with Retry-After); the catch-up goes on, and the retry finds
// what another node wrote. Without it the search answered at once, and
// without the write.
func TestSharedStoreReadsCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gated := &gatedIndex{gate: make(chan struct{})}
	h := memorytest.Open(t, func(s *memory.Service) {
		gated.Index = s.Index
		s.Index, s.SharedStore, s.CatchUpWait = gated, true, 50*time.Millisecond
	})
	var open sync.Once
	release := func() { open.Do(func() { close(gated.gate) }) }
	t.Cleanup(release) // before the harness's, which waits for the index
	// Another node's write: straight into the shared store.
	msg := &memory.Message{ID: "other-node-1", Role: memory.RoleUser, Content: "the okapi grazes at dawn", Tokens: 7,
		State: memory.StateActive, CreatedAt: h.Clock.Now(), Vector: make([]float32, 100)}
	msg.Vector[0] = 1
	create := func() *memory.Session {
		return &memory.Session{Tenant: memory.DefaultTenant, ID: "s", ContextWindow: 8000, Encoding: memory.EncodingO200k}
	}
	if _, err := h.Store.Append(ctx, memory.DefaultTenant, "s", create, []*memory.Message{msg}); err != nil {
		t.Fatal(err)
	}
	q := memory.SearchRequest{Query: "okapi", Mode: memory.ModeText, K: 5}
	start := time.Now()
	_, err := h.Search(ctx, q)
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("search while the index lags: %v, want unavailable", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the wait was not bounded: %v", took)
	}
	_, err = h.Context(ctx, "s", memory.ContextRequest{Prompt: "okapi", MaxTokens: 1000})
	if memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("context while the index lags: %v, want unavailable", err)
	}
	release()
	// The catch-up the refused calls started goes on; Wait returns once the
	// index holds the store's changes (the retry's own wait is 50 ms).
	if err := h.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	hits, err := h.Search(ctx, q)
	if err != nil || len(hits) != 1 || hits[0].ID != "other-node-1" {
		t.Fatalf("search once the index caught up: %+v, %v", hits, err)
	}
}
