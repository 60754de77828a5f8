package memory

import (
	"cmp"
	"slices"
)

// A hybrid search within a few sessions ranks a pool of neighbourPool results (at
// least 5 k) and adds to each a share of the best score of the turns around
// it in the pool: neighbourWeight of the turns just before and after it,
// and a quarter of that (the weight over the distance squared) of the turns
// two away; then it keeps the best k. A question's words are often in one
// turn and its answer in the next (the reply, a tool's output after its
// call), or the other way round, and a topic runs over a few turns.
//
// Measured on LoCoMo dev (ctxd-bench eval --no-context, recall R@5/10/20
// overall; none: 57.6/67.5/75.2): at distance 1 only, weight 0.15 60.8/71.2/
// 78.4, 0.3 62.2/73.4/77.9, 0.45 62.8/71.7/77.2, 0.6 62.7/71.8/75.7; at 0.3 a
// pool of 50 61.0/72.1/77.3, 300 63.3/73.6/78.8. Single-hop R@10 68.0 ->
// 81.1; multi-hop 38.1 -> 38.7, temporal 90.5 either way, open-domain 36.4
// -> 31.8 (one question of 11). Bringing each of the first 10 results' next
// turn in as well (at the weight times its score) changed nothing at 0.3.
// Turns two away at 0.075 (0.3/2²): 62.3/74.1/78.8, no category lower at any
// k (multi-hop R@10 38.7 -> 39.9, single-hop 81.1 -> 82.0, temporal R@20 95.2
// -> 96.8); at 0.15 (0.3/2) 64.0/75.4/80.4 but multi-hop R@20 48.7 -> 48.1;
// adding turns three away at 0.1 as well 64.6/74.8/80.8, multi-hop R@20 47.9.
// With turns two away, a pool of 200: 63.9/74.7/80.3, every category at or
// above the pool of 100 at every k (multi-hop 23.0/39.9/48.7 -> 27.1/40.9/
// 51.0, open-domain R@20 31.8 -> 36.4); 300: 63.7/74.9/81.4 but multi-hop
// R@10 39.7. The pool is resolved from the store: 200 messages by id per
// search (search latency on LoCoMo, k 20: p50 5.2-6.3 ms -> 5.4-8.4 ms on a
// machine at a load of 15).
const (
	neighbourWeight = 0.3
	neighbourPool   = 200
)

// neighbourWeights is the share of a neighbour's score a result gains, by
// distance in turns (index 0: the turns next to it).
var neighbourWeights = [...]float64{neighbourWeight, neighbourWeight / 4}

type seqKey struct {
	session string
	seq     uint64
}

// rankPool re-ranks the pool res of a search for query: each result gains
// its NeighborScore, is weighed by its author (see weighAuthors) and gains
// its WhenScore, weighed alike (see addWhenBonus); it keeps the best k.
func rankPool(res []SearchResult, query string, k int) []SearchResult {
	addNeighbourScores(res)
	weighAuthors(res, query)
	addWhenBonus(res, query, k)
	slices.SortStableFunc(res, func(a, b SearchResult) int { return cmp.Compare(b.Score, a.Score) })
	return res[:min(k, len(res))]
}

// addNeighbourScores adds to each result of the pool res its NeighborScore,
// from its neighbours' scores in the index.
func addNeighbourScores(res []SearchResult) {
	score := make(map[seqKey]float64, len(res))
	for _, x := range res {
		score[seqKey{x.SessionID, x.Seq}] = x.Score
	}
	for i := range res {
		x := &res[i]
		for d, w := range neighbourWeights {
			dist := uint64(d + 1)
			nb := score[seqKey{x.SessionID, x.Seq + dist}]
			if x.Seq >= dist {
				nb = max(nb, score[seqKey{x.SessionID, x.Seq - dist}])
			}
			x.NeighborScore += w * nb
		}
		x.Score += x.NeighborScore // score keeps the index's scores
	}
}
