package index

import (
	"context"
	"fmt"
	"testing"

	"github.com/ctxd/ctxd/memory"
)

// On a large enough index, words in most documents drop out of the text
// clause when rarer ones remain, and the rarest survive when none is rare.
func TestCommonTermsArePruned(t *testing.T) {
	old := commonTermMinDocs
	commonTermMinDocs = 100
	t.Cleanup(func() { commonTermMinDocs = old })

	x := openTest(t, Options{})
	var batch []*memory.Message
	for i := 0; i < 200; i++ {
		content := "weather report for the harbour"
		if i%50 == 0 {
			content += " walrus"
		}
		if i%10 == 0 {
			content += " gull" // in 10% of documents: not common enough to prune
		}
		batch = append(batch, msg("t", "s", fmt.Sprintf("m%03d", i), content, 0))
	}
	batch[7].Content += " zeppelin"
	mustApply(t, x, memory.IndexBatch{Upserts: batch, Watermark: 1})

	ctx := context.Background()
	if got := x.withoutCommonTerms(ctx, "t", "weather zeppelin"); got != "zeppelin" {
		t.Fatalf("pruned query = %q, want the rare word only", got)
	}
	if got := x.withoutCommonTerms(ctx, "t", "weather harbour walrus"); got != "walrus" {
		t.Fatalf("pruned query = %q", got)
	}
	if got := x.withoutCommonTerms(ctx, "t", "weather gull zeppelin"); got != "gull zeppelin" {
		t.Fatalf("pruned query = %q, want the words in under a fifth of the documents", got)
	}
	if got := x.withoutCommonTerms(ctx, "t", "zeppelin walrus"); got != "zeppelin walrus" {
		t.Fatalf("a query of rare words changed: %q", got)
	}
	if got := x.withoutCommonTerms(ctx, "t", "weather harbour report"); len(got) == 0 || got == "weather harbour report" {
		t.Fatalf("a query of common words only should keep its rarest few, got %q", got)
	}
	// The rarest few are distinct terms: a repeated common word (here in
	// two spellings of one stem) is searched once.
	if got := x.withoutCommonTerms(ctx, "t", "the weather Weather report"); got != "weather" {
		t.Fatalf("a repeated common word: %q", got)
	}
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "weather zeppelin", Mode: memory.ModeText, K: 1})
	if len(hits) != 1 || hits[0].ID != "m007" {
		t.Fatalf("search after pruning = %v", ids(hits))
	}
}

// The document frequencies a search caches hold until the next write: a
// word that writes make common is pruned from the next search, and one
// that deletes make rare again is searched again.
func TestCommonTermsFollowWrites(t *testing.T) {
	old := commonTermMinDocs
	commonTermMinDocs = 100
	t.Cleanup(func() { commonTermMinDocs = old })

	x := openTest(t, Options{})
	var batch []*memory.Message
	for i := 0; i < 200; i++ {
		batch = append(batch, msg("t", "s", fmt.Sprintf("m%03d", i), "weather report", 0))
	}
	batch[0].Content += " walrus"
	mustApply(t, x, memory.IndexBatch{Upserts: batch, Watermark: 1})
	ctx := context.Background()
	if got := x.withoutCommonTerms(ctx, "t", "weather walrus"); got != "walrus" {
		t.Fatalf("pruned query = %q", got)
	}
	var more []*memory.Message
	for i := 0; i < 100; i++ {
		more = append(more, msg("t", "s", fmt.Sprintf("w%03d", i), "walrus", 0))
	}
	mustApply(t, x, memory.IndexBatch{Upserts: more, Watermark: 2})
	// walrus is now in a third of the documents.
	if got := x.withoutCommonTerms(ctx, "t", "walrus zeppelin"); got != "zeppelin" {
		t.Fatalf("a word made common by a write was not pruned: %q", got)
	}
	mustApply(t, x, memory.IndexBatch{Deletes: more, Watermark: 3})
	if got := x.withoutCommonTerms(ctx, "t", "walrus zeppelin"); got != "walrus zeppelin" {
		t.Fatalf("a word made rare again by deletes was pruned: %q", got)
	}
}

// A text hit of a search within one session names it without being loaded
// from Bleve, and across sessions it is loaded to learn it.
func TestTextHitsNameTheirSession(t *testing.T) {
	x := openTest(t, Options{})
	mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{
		msg("t", "s1", "a", "walrus in the harbour", 0),
		msg("t", "s2", "b", "walrus on the beach", 1),
	}, Watermark: 1})
	for _, sessions := range [][]string{{"s1"}, {"s2"}, nil} {
		hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: "walrus", Sessions: sessions, Mode: memory.ModeText})
		if want := map[int]int{0: 2, 1: 1}[len(sessions)]; len(hits) != want {
			t.Fatalf("sessions %v: hits %v", sessions, ids(hits))
		}
		for _, h := range hits {
			want := map[string]string{"a": "s1", "b": "s2"}[h.ID]
			if h.SessionID != want {
				t.Errorf("sessions %v: hit %s names session %q, want %q", sessions, h.ID, h.SessionID, want)
			}
		}
	}
}
