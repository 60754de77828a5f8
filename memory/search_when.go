package memory

import (
	"slices"

	"github.com/ctxd/ctxd/scoring"
)

// A question that asks when (scoring.AsksWhen: when, how long, what
// year...) is answered by a turn that states a time ("yesterday", "last
// May", "two years ago"), and neither the question's words nor its vector
// say so. The window builder favours such turns for such prompts
// (scoring.DefaultWhenBonus); a search of a few sessions adds whenBonus to
// the score of each result of its pool that states a time, after the
// neighbours' shares (a neighbour does not gain from it) and before the
// author weight (it is weighed with the rest of the score).
//
// Measured on LoCoMo dev (ctxd-bench eval --no-context, recall R@5/10/20,
// with the author weight; without this: overall 67.3/76.4/82.7, temporal
// 88.9/92.1/96.8, multi-hop 30.2/45.5/54.5): 0.03 67.3/76.7/82.7; 0.05
// 68.0/78.0/83.1; 0.1 68.0/78.0/83.3, temporal 90.5/96.8/96.8, multi-hop
// 31.4/46.7/58.0; 0.2 68.2/77.5/83.3 but single-hop R@20 87.3 -> 86.4. At
// 0.05 and 0.1 no category is lower at any k; 0.1 is a tenth of a perfect
// match of both sides.
const whenBonus = 0.1

// addWhenBonus adds whenBonus, times the result's AuthorWeight, to each
// result of res that states a time, when query asks when, and records it
// on the result: Score is then (fused + NeighborScore + WhenScore) *
// AuthorWeight. Only a result that the bonus could bring into the best k
// is read: StatesTime over the 200 texts of a pool took 1.8 ms, a third of
// a search.
func addWhenBonus(res []SearchResult, query string, k int) {
	if !scoring.AsksWhen(query) || len(res) == 0 {
		return
	}
	scores := make([]float64, len(res))
	for i, x := range res {
		scores[i] = x.Score
	}
	slices.Sort(scores)
	bar := scores[max(len(scores)-k, 0)] // the k-th best score without bonuses
	for i := range res {
		x := &res[i]
		if gain := whenBonus * x.AuthorWeight; x.Score+gain >= bar && scoring.StatesTime(x.Content) {
			x.WhenScore = whenBonus
			x.Score += gain
		}
	}
}
