package memory_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// enteredIndex is gatedIndex that also says when an update reached it.
type enteredIndex struct {
	gatedIndex
	entered chan struct{}
	once    sync.Once
}

func (e *enteredIndex) Apply(ctx context.Context, b memory.IndexBatch) error {
	e.once.Do(func() { close(e.entered) })
	return e.gatedIndex.Apply(ctx, b)
}

// On the embedded store an append is answered once the store holds it; the
// index takes it in the background, batched with the next writes. A search
// of the session answered after the append still finds it: it waits for the
// index to hold every write answered so far to the session; a search of
// another session does not wait. Before, the append itself waited for the
// index (one small Bleve batch per request); without the search's wait the
// search answered from an index without the message.
func TestAppendDefersIndexSearchStillSeesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ix := &enteredIndex{gatedIndex: gatedIndex{gate: make(chan struct{})}, entered: make(chan struct{})}
	h := memorytest.Open(t, func(s *memory.Service) {
		ix.Index = s.Index
		s.Index = ix
	})
	var open sync.Once
	release := func() { open.Do(func() { close(ix.gate) }) }
	t.Cleanup(release) // before the harness's, which waits for the index

	appended := make(chan error, 1)
	go func() {
		_, err := h.Append(ctx, "s", []*memory.Message{{Role: memory.RoleUser, Content: "the okapi grazes at dawn"}})
		appended <- err
	}()
	select {
	case err := <-appended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the append waited for the index")
	}

	// A search of another session does not wait for this one's write.
	other := make(chan error, 1)
	go func() {
		_, err := h.Search(ctx, memory.SearchRequest{Query: "okapi", Sessions: []string{"other"}, Mode: memory.ModeText, K: 5})
		other <- err
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a search of another session waited for the index")
	}

	type result struct {
		hits []memory.SearchResult
		err  error
	}
	searched := make(chan result, 1)
	go func() {
		hits, err := h.Search(ctx, memory.SearchRequest{Query: "okapi", Sessions: []string{"s"}, Mode: memory.ModeText, K: 5})
		searched <- result{hits, err}
	}()
	var r result
	select {
	case r = <-searched: // answered without waiting for the index
	case <-ix.entered: // an index update is under way: let it finish
		release()
		r = <-searched
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	if len(r.hits) != 1 || r.hits[0].Content != "the okapi grazes at dawn" {
		t.Fatalf("search after the append was answered: %+v, want the message", r.hits)
	}
}
