package memory

import (
	"math"
	"testing"
)

// A result gains neighbourWeight of the better of the turns next to it and a
// quarter of that of the turns two away, from their scores in the index (not
// from what their own neighbours gave them); farther turns give nothing.
func TestNeighbourScoresByDistance(t *testing.T) {
	t.Parallel()
	res := []SearchResult{
		{Message: &Message{ID: "q", SessionID: "s", Seq: 10}, Score: 1},
		{Message: &Message{ID: "next", SessionID: "s", Seq: 11}, Score: 0.2},
		{Message: &Message{ID: "two", SessionID: "s", Seq: 12}, Score: 0.5},
		{Message: &Message{ID: "three", SessionID: "s", Seq: 13}, Score: 0.1},
		{Message: &Message{ID: "far", SessionID: "s", Seq: 20}, Score: 0.3},
		{Message: &Message{ID: "other", SessionID: "t", Seq: 12}, Score: 0.4},
	}
	want := map[string]float64{
		"q":     1 + 0.3*0.2 + 0.075*0.5,
		"next":  0.2 + 0.3*1 + 0.075*0.1,
		"two":   0.5 + 0.3*0.2 + 0.075*1,
		"three": 0.1 + 0.3*0.5 + 0.075*0.2,
		"far":   0.3,
		"other": 0.4,
	}
	before := map[string]float64{}
	for _, r := range res {
		before[r.ID] = r.Score
	}
	got := rankPool(res, "", len(res))
	for i, r := range got {
		if math.Abs(r.Score-want[r.ID]) > 1e-9 || math.Abs(r.NeighborScore-(want[r.ID]-before[r.ID])) > 1e-9 {
			t.Errorf("%s: score %.4f (+%.4f), want %.4f", r.ID, r.Score, r.NeighborScore, want[r.ID])
		}
		if i > 0 && got[i-1].Score < r.Score {
			t.Errorf("not best first at %d: %s %.4f after %s %.4f", i, r.ID, r.Score, got[i-1].ID, got[i-1].Score)
		}
	}
}
