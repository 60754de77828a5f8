package index

import (
	"fmt"
	"slices"
	"testing"

	"github.com/blevesearch/bleve/v2/search/query"

	"github.com/ctxd/ctxd/memory"
)

// Expansion finds a document by a neighbour of a query word, below the
// documents that have the word itself, only when it is switched on, asked
// for and in hybrid mode.
func TestQueryExpansion(t *testing.T) {
	neighbours := map[string][]string{"automobile": {"cars", "car", "vehicle"}, "car": {"cars", "automobile"}}
	expander := func(word string) []string { return neighbours[word] }
	docs := []*memory.Message{
		msg("t", "s", "m1", "my car broke down on the motorway", 0),
		msg("t", "s", "m2", "the automobile museum opens on sunday", 0),
		msg("t", "s", "m3", "we had soup for lunch", 0),
	}
	search := func(x *Index, text string) []string {
		return ids(mustSearch(t, x, memory.SearchQuery{Tenant: "t", Text: text, Mode: memory.ModeHybrid, K: 10, Expand: true}))
	}

	off := openTest(t, Options{Expander: expander})
	mustApply(t, off, memory.IndexBatch{Upserts: docs, Watermark: 1})
	if got := search(off, "automobile"); len(got) != 1 || got[0] != "m2" {
		t.Fatalf("without a weight, expansion is off: got %v", got)
	}

	on := openTest(t, Options{Expander: expander, ExpansionWeight: 0.3})
	mustApply(t, on, memory.IndexBatch{Upserts: docs, Watermark: 1})
	if got := search(on, "automobile"); len(got) != 2 || got[0] != "m2" || got[1] != "m1" {
		t.Fatalf("expanded search = %v, want the word's own document first, then its neighbour's", got)
	}
	// Text mode is the literal match: no expansion.
	literal := ids(mustSearch(t, on, memory.SearchQuery{Tenant: "t", Text: "automobile", Mode: memory.ModeText, K: 10, Expand: true}))
	if len(literal) != 1 || literal[0] != "m2" {
		t.Fatalf("text mode expanded: %v", literal)
	}
	// A query that does not ask for expansion gets none.
	plain := ids(mustSearch(t, on, memory.SearchQuery{Tenant: "t", Text: "automobile", Mode: memory.ModeHybrid, K: 10}))
	if len(plain) != 1 || plain[0] != "m2" {
		t.Fatalf("a query without Expand expanded: %v", plain)
	}
	// "cars" and "car" are one term: the query gets it once, and a query
	// word's own term is never added as its neighbour.
	for word, want := range map[string]string{"automobile": "cars vehicle", "car": "automobile"} {
		if q, ok := on.expansionQuery("t", on.expansionWords("t", word)).(*query.MatchQuery); !ok || q.Match != want {
			t.Errorf("expansion of %q = %v, want a match of %q", word, on.expansionWords("t", word), want)
		}
	}
	if q := on.expansionQuery("t", on.expansionWords("t", "soup")); q != nil {
		t.Fatalf("a word with no neighbours got an expansion clause: %v", q)
	}
	if _, err := Open(t.TempDir(), Options{ExpansionWeight: -1}); err == nil {
		t.Fatal("a negative expansion weight was accepted")
	}
}

// Expansion is bounded: the first few distinct terms are looked up (each
// lookup may scan the model), and neighbours that are common words on a
// large index are left out, as common query words are.
func TestQueryExpansionBounds(t *testing.T) {
	old := commonTermMinDocs
	commonTermMinDocs = 10
	t.Cleanup(func() { commonTermMinDocs = old })
	var looked []string
	expander := func(word string) []string {
		looked = append(looked, word)
		return []string{"weather", "zeppelin" + word, "walrus" + word}
	}
	x := openTest(t, Options{Expander: expander, ExpansionWeight: 0.5})
	var docs []*memory.Message
	for i := 0; i < 20; i++ {
		docs = append(docs, msg("t", "s", fmt.Sprintf("m%02d", i), "the weather today", 0))
	}
	mustApply(t, x, memory.IndexBatch{Upserts: docs, Watermark: 20})

	words := x.expansionWords("t", "alpha beta alpha gamma delta epsilon zeta eta theta iota kappa")
	if want := []string{"alpha", "beta", "gamma", "delta", "epsilon", "zeta"}; !slices.Equal(looked, want) {
		t.Errorf("looked up %v, want the first %d distinct terms %v", looked, expandedTerms, want)
	}
	if len(words) != 2*expandedTerms || slices.Contains(words, "weather") {
		t.Errorf("expansion words %v: want two a term, and no common word", words)
	}
}
