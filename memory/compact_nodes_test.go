package memory_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/memory"
)

// hookSummarizer runs hook once, in the middle of the first compaction
// that summarizes: after it read the session, before it commits.
type hookSummarizer struct {
	memory.Summarizer
	once sync.Once
	hook func()
}

func (h *hookSummarizer) Summarize(ctx context.Context, req memory.SummaryRequest) (memory.Summary, error) {
	h.once.Do(h.hook)
	return h.Summarizer.Summarize(ctx, req)
}

// Two nodes compact one session at once (a node serialises its own
// compactions, not another's): the one that commits second decided on a
// session it read before the first committed, and its rolling summary
// extends a version that is gone. It must apply nothing: applied, it
// overwrote the summary the other wrote, leaving that one's originals
// summarized in no summary's sources (TestSIGKILLNodeOnPostgres saw it).
func TestCompactionRacingAnotherNode(t *testing.T) {
	t.Parallel()
	var hs *hookSummarizer
	h := memorytest.Open(t, func(s *memory.Service) {
		s.SharedStore = true
		hs = &hookSummarizer{Summarizer: s.Summarizer}
		s.Summarizer = hs
	})
	// Node B: another Service on the same store and index.
	b := &memory.Service{Store: h.Store, Index: h.Index, Embedder: h.Embedder, Tokenizer: h.Tokenizer,
		Summarizer: hs.Summarizer, Now: h.Clock.Now, SharedStore: true}
	ctx := context.Background()
	if err := b.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	window, cutoff := 2000, 0.0
	if _, err := h.PutSession(ctx, "s", memory.SessionUpdate{ContextWindow: &window,
		Policy: &memory.PolicyOverrides{RelevanceCutoff: &cutoff}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 40; i++ {
		role := memory.RoleUser
		if i%2 == 1 {
			role = memory.RoleAssistant
		}
		if _, err := b.Append(ctx, "s", []*memory.Message{{Role: role, Content: fmt.Sprintf("turn %d: the ferry to the island leaves at %d:15 from pier %d.", i, 6+i%12, i%5)}}); err != nil {
			t.Fatal(err)
		}
	}
	var other *memory.CompactionReport
	hs.hook = func() {
		var err error
		if other, err = b.Compact(ctx, "s", memory.CompactRequest{}); err != nil {
			t.Error(err)
		}
	}
	rep, err := h.Compact(ctx, "s", memory.CompactRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if other == nil || len(other.Summarized) == 0 {
		t.Fatalf("node B's compaction summarized nothing: %+v", other)
	}
	if len(rep.Summarized)+len(rep.Dropped) != 0 || !strings.Contains(strings.Join(rep.Notes, " "), "compacted elsewhere") {
		t.Errorf("the second commit applied a compaction decided before the first: %+v", rep)
	}
	// memorytest's Check, at cleanup, requires every summarized original
	// in exactly one live summary's sources.
}
