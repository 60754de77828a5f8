package scoring

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Weights are the relative weights of the four components. Only their ratios
// matter: ScoreAll divides by their sum, so totals stay in [0,1] whatever the
// scale.
type Weights struct {
	Similarity float64 `json:"similarity"`
	Recency    float64 `json:"recency"`
	References float64 `json:"references"`
	Importance float64 `json:"importance"`
}

func (w Weights) sum() float64 { return w.Similarity + w.Recency + w.References + w.Importance }

// normalized returns w scaled to sum to 1. Callers have validated w.
func (w Weights) normalized() Weights {
	s := w.sum()
	return Weights{w.Similarity / s, w.Recency / s, w.References / s, w.Importance / s}
}

// Params configure ScoreAll.
type Params struct {
	Weights Weights `json:"weights"`
	// VectorWeight is the share of the vector side in the similarity
	// component, in [0,1]; the BM25 side gets the rest.
	VectorWeight float64 `json:"vector_weight"`
	// HalfLifeTurns is how many turns back a message's recency halves; > 0.
	HalfLifeTurns float64 `json:"half_life_turns"`
	// HalfLife is the same in wall-clock time; 0 turns it off. When on,
	// recency is the larger of the two decays, so a message is old only
	// when it is old both in turns and in time (a burst of tool calls does
	// not age a minute-old message, and a quiet day does not age the last
	// turn).
	HalfLife time.Duration `json:"half_life"`
	// WhenBonus is added to the total of a candidate that states a time;
	// the caller sets it for a prompt that asks when (AsksWhen), else 0.
	// In [0,1].
	WhenBonus float64 `json:"when_bonus,omitempty"`
}

// DefaultWhenBonus: LoCoMo dev, evidence in window (window 4096, budget
// 2048), temporal %, with a recovered turn's answer brought along
// (maxReplies): bonus 0 98.4/96.8/98.4; 0.05 100/98.4/96.8/98.4/96.8/98.4,
// then 96.8 x5 once merged with later changes (q1's evidence, "a painting of
// a sunset", states no time and lost its place to dated turns); 0.03 98.4
// x5 (single-hop 89.0-91.2, multi-hop 67.1-70.6, open-domain 77.3, overall
// 87.2-88.5; `ctxd eval --misses` lists what is left: q225). 0.1 on cold
// candidates only: 96.8 x3, open-domain 77.3 -> 68.2. A tie-breaker, not a
// filter: a fifth of the temporal evidence states no time.
const DefaultWhenBonus = 0.03

// DefaultParams are provisional; see the package documentation.
var DefaultParams = Params{
	Weights:       Weights{Similarity: 0.45, Recency: 0.25, References: 0.20, Importance: 0.10},
	VectorWeight:  0.2,
	HalfLifeTurns: 24,
}

// Validate reports the first thing wrong with p, naming the field.
func (p Params) Validate() error {
	w := p.Weights
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"similarity", w.Similarity},
		{"recency", w.Recency},
		{"references", w.References},
		{"importance", w.Importance},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return fmt.Errorf("scoring: weights.%s: %v is not a finite number >= 0", f.name, f.v)
		}
	}
	if s := w.sum(); !(s > 0) || math.IsInf(s, 0) {
		return errors.New("scoring: weights: at least one weight must be > 0")
	}
	if math.IsNaN(p.VectorWeight) || p.VectorWeight < 0 || p.VectorWeight > 1 {
		return fmt.Errorf("scoring: vector_weight: %v is not in [0,1]", p.VectorWeight)
	}
	if math.IsNaN(p.HalfLifeTurns) || math.IsInf(p.HalfLifeTurns, 0) || p.HalfLifeTurns <= 0 {
		return fmt.Errorf("scoring: half_life_turns: %v is not a finite number > 0", p.HalfLifeTurns)
	}
	if math.IsNaN(p.WhenBonus) || p.WhenBonus < 0 || p.WhenBonus > 1 {
		return fmt.Errorf("scoring: when_bonus: %v is not in [0,1]", p.WhenBonus)
	}
	if p.HalfLife < 0 {
		return fmt.Errorf("scoring: half_life: %v is negative", p.HalfLife)
	}
	return nil
}
