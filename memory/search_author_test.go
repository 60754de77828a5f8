package memory

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"github.com/ctxd/ctxd/scoring"
)

// A query that names some of the pool's authors weighs the score of the
// other authors' results down; one that names none of them, or all,
// changes nothing, and a result without an author keeps its score.
// Names match as whole words in a row, in any case, possessive or not.
func TestWeighAuthors(t *testing.T) {
	t.Parallel()
	pool := func() []SearchResult {
		return []SearchResult{
			{Message: &Message{ID: "a", Name: "Ana Lima"}, Score: 1},
			{Message: &Message{ID: "b", Name: "bob"}, Score: 0.8},
			{Message: &Message{ID: "c", Name: "Cleo"}, Score: 0.6},
			{Message: &Message{ID: "tool"}, Score: 0.4}, // no author: never weighed
		}
	}
	for _, c := range []struct {
		query string
		named []string // authors whose results keep their score
	}{
		{"What does Bob cook?", []string{"bob"}},
		{"what did ana lima's team ship", []string{"Ana Lima"}},
		{"Did Bob and Cleo meet Ana Lima?", nil}, // every author: no weight
		{"What did Ana say?", nil},               // part of a name
		{"Bobby tables", nil},                    // a longer word
		{"who was at the party", nil},
		{"Which trips did Cleo and Bob take?", []string{"bob", "Cleo"}},
	} {
		res := pool()
		weighAuthors(res, c.query)
		keep := map[string]bool{}
		for _, n := range c.named {
			keep[n] = true
		}
		for i, r := range res {
			want, weight := pool()[i].Score, 1.0
			if c.named != nil && r.Name != "" && !keep[r.Name] {
				want, weight = want*otherAuthorWeight, otherAuthorWeight
			}
			if r.Score != want || r.AuthorWeight != weight {
				t.Errorf("%q: %s scored %v (weight %v), want %v (%v)", c.query, r.ID, r.Score, r.AuthorWeight, want, weight)
			}
		}
	}
}

// The when bonus reads only the results it could bring into the best k: the
// best k are those that a bonus given to every result that states a time
// would choose, with the same scores.
func TestWhenBonusBestK(t *testing.T) {
	t.Parallel()
	texts := []string{"we met yesterday", "the harbour was lovely", "two years ago it rained", "bread and olives"}
	pool := func() []SearchResult {
		res := make([]SearchResult, 40)
		for i := range res {
			res[i] = SearchResult{Message: &Message{ID: string(rune('a' + i)), Seq: uint64(10 * i),
				Name: []string{"Alma", "Bruno"}[i%2], Content: texts[i%len(texts)]}, Score: float64((i*7)%40) / 40}
		}
		return res
	}
	const query, k = "When did Alma see the harbour?", 8
	got := rankPool(pool(), query, k)

	want := pool()
	addNeighbourScores(want)
	weighAuthors(want, query)
	for i := range want {
		if scoring.StatesTime(want[i].Content) {
			want[i].Score += whenBonus * want[i].AuthorWeight
		}
	}
	slices.SortStableFunc(want, func(a, b SearchResult) int { return cmp.Compare(b.Score, a.Score) })
	for i := range k {
		if got[i].ID != want[i].ID || math.Abs(got[i].Score-want[i].Score) > 1e-12 {
			t.Errorf("%d: %s %.4f, want %s %.4f", i, got[i].ID, got[i].Score, want[i].ID, want[i].Score)
		}
	}
}
