package memory_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// A new node on a shared store answers before its index is built: it opens
// with the build held, and a search or window of a session the build has
// not reached indexes that session first (with what another node wrote
// since), while a search across sessions answers unavailable until the
// build is done. The index's persisted watermark stays 0 meanwhile (a node
// stopped mid-build must not take its index as whole at its next start).
// Replaying the feed before answering, a node of 100,000 messages took
// 188 s to answer anything.
func TestNewNodeAnswersWhileItsIndexBuilds(t *testing.T) {
	ctx := context.Background()
	h := memorytest.Open(t, func(s *memory.Service) { s.SharedStore = true })
	write := func(session, text string) {
		t.Helper()
		if _, err := h.Append(ctx, session, []*memory.Message{{Role: memory.RoleUser, Content: text}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		write("alpha", fmt.Sprintf("alpha note %d: the heron nests by the mill", i))
		write("beta", fmt.Sprintf("beta note %d: the otter fishes below the weir", i))
		write("gamma", fmt.Sprintf("gamma note %d: the kingfisher dives at noon", i))
	}
	gate := make(chan struct{})
	restore := memory.HoldBuild(2, gate)
	t.Cleanup(restore)
	node, idx := h.Node(t)
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release) // before the node's cleanup, which waits for the build

	if err := node.Ready(ctx); err != nil {
		t.Fatalf("the new node is not ready while it builds: %v", err)
	}
	if _, err := node.Search(ctx, memory.SearchRequest{Query: "heron", Mode: memory.ModeText, K: 10}); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("a search across sessions during the build: %v, want unavailable", err)
	}
	// Another node writes to gamma after the new node started.
	write("gamma", "gamma note 3: the kingfisher came back at dusk")
	hits, err := node.Search(ctx, memory.SearchRequest{Query: "kingfisher", Mode: memory.ModeText, K: 10, Sessions: []string{"gamma"}})
	if err != nil || len(hits) != 4 {
		t.Fatalf("a search of gamma during the build: %d hits, %v; want its 4 messages", len(hits), err)
	}
	res, err := node.Context(ctx, "beta", memory.ContextRequest{Prompt: "otter", MaxTokens: 2000})
	if err != nil || len(res.Messages) != 3 {
		t.Fatalf("beta's window during the build: %+v, %v", res, err)
	}
	if wm, err := idx.Watermark(); err != nil || wm != 0 {
		t.Fatalf("persisted watermark during the build: %d, %v; want 0", wm, err)
	}
	release()
	if err := node.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	hits, err = node.Search(ctx, memory.SearchRequest{Query: "note", Mode: memory.ModeText, K: 20})
	if err != nil || len(hits) != 10 {
		t.Fatalf("a search across sessions once built: %d hits, %v; want 10", len(hits), err)
	}
	var sessions []string
	for _, hit := range hits {
		if !slices.Contains(sessions, hit.SessionID) {
			sessions = append(sessions, hit.SessionID)
		}
	}
	if slices.Sort(sessions); !slices.Equal(sessions, []string{"alpha", "beta", "gamma"}) {
		t.Fatalf("sessions found: %v", sessions)
	}
	last, err := h.Store.LastSeq(ctx)
	if wm, werr := idx.Watermark(); err != nil || werr != nil || wm != last {
		t.Fatalf("persisted watermark once built: %d, want the store's %d (%v, %v)", wm, last, err, werr)
	}
}

// A request naming a session that arrives while a step of the build holds
// the indexer's lock waits for the slice under way, not for the step: the
// build gives it the lock between two slices, and it is answered while
// the build stays held. A step of 1,000 messages in one batch made such a
// request wait past CatchUpWait (503) on a busy machine.
func TestRequestGoesBeforeTheBuildStep(t *testing.T) {
	ctx := context.Background()
	h := memorytest.Open(t, func(s *memory.Service) { s.SharedStore = true })
	for i := range 3 {
		for _, s := range []string{"alpha", "beta", "gamma"} {
			text := fmt.Sprintf("%s note %d: the kingfisher dives at noon", s, i)
			if _, err := h.Append(ctx, s, []*memory.Message{{Role: memory.RoleUser, Content: text}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	gate := make(chan struct{})
	waiting := make(chan struct{}, 4)
	t.Cleanup(memory.HoldBuildSlices(2, gate, waiting))
	node, _ := h.Node(t, func(s *memory.Service) { s.CatchUpWait = time.Minute })
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(release)

	gate <- struct{}{} // the step's first slice: the step holds the lock
	type answer struct {
		hits int
		err  error
	}
	done := make(chan answer, 1)
	go func() {
		hits, err := node.Search(ctx, memory.SearchRequest{Query: "kingfisher", Mode: memory.ModeText, K: 10, Sessions: []string{"gamma"}})
		done <- answer{len(hits), err}
	}()
	<-waiting
	gate <- struct{}{} // the slice under way; then the step gives way
	select {
	case a := <-done:
		if a.err != nil || a.hits != 3 {
			t.Fatalf("gamma searched during the build: %d hits, %v; want its 3 messages", a.hits, a.err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the request still waits for the build step to end")
	}
	if _, err := node.Search(ctx, memory.SearchRequest{Query: "kingfisher", Mode: memory.ModeText, K: 10}); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("a search across sessions with the build still held: %v, want unavailable", err)
	}
	release()
	if err := node.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if hits, err := node.Search(ctx, memory.SearchRequest{Query: "kingfisher", Mode: memory.ModeText, K: 20}); err != nil || len(hits) != 9 {
		t.Fatalf("once built: %d hits, %v; want 9", len(hits), err)
	}
}

// A node stopped mid-build leaves an index of some documents at watermark
// 0. At its next start it answers at once and builds in the background,
// as a new node does (it replayed the whole feed, or rebuilt the index,
// before it answered); the build's end deletes the documents of messages
// deleted while it was stopped.
func TestNodeStoppedMidBuildBuildsInBackground(t *testing.T) {
	ctx := context.Background()
	h := memorytest.Open(t, func(s *memory.Service) { s.SharedStore = true })
	for i := range 3 {
		for _, s := range []string{"alpha", "beta", "gamma"} {
			text := fmt.Sprintf("%s note %d: the kingfisher dives at noon", s, i)
			if _, err := h.Append(ctx, s, []*memory.Message{{Role: memory.RoleUser, Content: text}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What the stopped build left: alpha indexed, and a message of alpha
	// deleted since, at watermark 0.
	dir := filepath.Join(t.TempDir(), "index")
	idx, err := index.Open(dir, index.Options{Texts: h.Store})
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := h.Store.Messages(ctx, memory.DefaultTenant, "alpha", memory.MessageQuery{Vectors: true})
	if err != nil || len(alpha) != 3 {
		t.Fatalf("alpha: %d messages, %v", len(alpha), err)
	}
	gone := *alpha[0]
	gone.ID, gone.Seq, gone.Content = "m-deleted-since", 99, "alpha note 9: the kingfisher left"
	if err := idx.Apply(ctx, memory.IndexBatch{Upserts: append(alpha, &gone), Watermark: 0}); err != nil {
		t.Fatal(err)
	}
	if err := idx.Close(); err != nil {
		t.Fatal(err)
	}

	gate := make(chan struct{})
	t.Cleanup(memory.HoldBuild(2, gate))
	if idx, err = index.Open(dir, index.Options{Texts: h.Store}); err != nil {
		t.Fatal(err)
	}
	node := &memory.Service{Store: h.Store, Index: idx, Embedder: h.Service.Embedder, Tokenizer: h.Service.Tokenizer,
		Summarizer: h.Service.Summarizer, Cold: h.Service.Cold, Now: h.Clock.Now, SharedStore: true}
	if err := node.Open(ctx); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
		}
	}
	t.Cleanup(func() {
		release()
		node.Close()
		idx.Close()
	})
	if err := node.Ready(ctx); err != nil {
		t.Fatalf("the restarted node is not ready: %v", err)
	}
	if _, err := node.Search(ctx, memory.SearchRequest{Query: "kingfisher", Mode: memory.ModeText, K: 20}); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("a search across sessions with the build held: %v, want unavailable (the build runs in the background)", err)
	}
	if wm, err := idx.Watermark(); err != nil || wm != 0 {
		t.Fatalf("watermark during the build: %d, %v", wm, err)
	}
	release()
	if err := node.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	hits, err := node.Search(ctx, memory.SearchRequest{Query: "kingfisher", Mode: memory.ModeText, K: 20})
	if err != nil || len(hits) != 9 {
		t.Fatalf("once built: %d hits, %v; want the 9 stored messages", len(hits), err)
	}
	// Searches skip a document whose message is gone; the index's count
	// says whether it is still there.
	if docs, _, err := idx.Count(); err != nil || docs != 9 {
		t.Fatalf("%d documents once built, %v: want 9, the deleted message's gone", docs, err)
	}
	last, _ := h.Store.LastSeq(ctx)
	if wm, err := idx.Watermark(); err != nil || wm != last {
		t.Fatalf("watermark once built: %d, %v; want %d", wm, err, last)
	}
}
