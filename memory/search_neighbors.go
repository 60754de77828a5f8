package memory

import (
	"cmp"
	"slices"
)

// A hybrid search within a few sessions ranks a pool of neighbourPool results (at
// least 5 k) and adds to each a share, neighbourWeight, of the best score of
// the turns just before and after it in the pool; then it keeps the best k.
// A question's words are often in one turn and its answer in the next (the
// reply, a tool's output after its call), or the other way round. Measured
// on LoCoMo dev (ctxd-bench eval --no-context, recall R@5/10/20 overall;
// none: 57.6/67.5/75.2): weight 0.15 60.8/71.2/78.4, 0.3 62.2/73.4/77.9,
// 0.45 62.8/71.7/77.2, 0.6 62.7/71.8/75.7; at 0.3 a pool of 50 61.0/72.1/
// 77.3, 300 63.3/73.6/78.8. Single-hop R@10 68.0 -> 81.1; multi-hop 38.1 ->
// 38.7, temporal 90.5 either way, open-domain 36.4 -> 31.8 (one question
// of 11). Bringing each of the first 10 results' next turn in as well (at
// the weight times its score) changed nothing at 0.3. The pool is resolved
// from the store: 100 messages by id per search.
const (
	neighbourWeight = 0.3
	neighbourPool   = 100
)

type seqKey struct {
	session string
	seq     uint64
}

// withNeighbourScores adds to each result of the pool res its
// NeighborScore, re-ranks and cuts to k.
func withNeighbourScores(res []SearchResult, k int) []SearchResult {
	score := make(map[seqKey]float64, len(res))
	for _, x := range res {
		score[seqKey{x.SessionID, x.Seq}] = x.Score
	}
	for i := range res {
		x := &res[i]
		nb := score[seqKey{x.SessionID, x.Seq + 1}]
		if x.Seq > 0 {
			nb = max(nb, score[seqKey{x.SessionID, x.Seq - 1}])
		}
		x.NeighborScore = neighbourWeight * nb
		x.Score += x.NeighborScore
	}
	slices.SortStableFunc(res, func(a, b SearchResult) int { return cmp.Compare(b.Score, a.Score) })
	return res[:min(k, len(res))]
}
