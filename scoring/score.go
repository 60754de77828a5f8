package scoring

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Candidate is a message to score against the current prompt.
type Candidate struct {
	ID   string
	Text string
	// Turn is the message's position in the session; it increases with
	// every message.
	Turn      int
	CreatedAt time.Time // zero: no time-based recency
	Important bool
	// BM25 is the message's full-text score for the prompt, 0 if the text
	// search did not find it.
	BM25 float64
	// Cosine is the similarity of the message's vector to the prompt's, in
	// [-1,1]; 0 if there is none.
	Cosine float64
	// StatesTime: the text states a time (see StatesTime). It counts only
	// when Params.WhenBonus is set, for a prompt that asks when.
	StatesTime bool
}

// Doc is one message of the session, for the references component.
type Doc struct {
	ID   string
	Text string
	Turn int
}

// Components are the four parts of a score, each in [0,1].
type Components struct {
	Similarity float64 `json:"similarity"`
	Recency    float64 `json:"recency"`
	References float64 `json:"references"`
	Importance float64 `json:"importance"`
	// When is 1 for a message that states a time when the prompt asks when
	// (Params.WhenBonus), else 0.
	When float64 `json:"when,omitempty"`
}

// Score is one candidate's relevance.
type Score struct {
	ID         string     `json:"id"`
	Total      float64    `json:"total"` // in [0,1]
	Components Components `json:"components"`
	// Referenced names the message's terms that later messages repeat,
	// those that weigh most first ("@id" for a mention of its id).
	Referenced []string `json:"referenced,omitempty"`
}

// ScoreAll scores every candidate against the current prompt, in the order
// given. With p.WhenBonus set (the prompt asks when), a candidate that
// states a time has it added to its total. all is the whole session (candidates or not), for the references
// component: a message counts as referring back when its Turn is greater.
// newestTurn and now are the present, for recency. Non-finite BM25 or
// cosine inputs count as 0.
func ScoreAll(p Params, cands []Candidate, all []Doc, newestTurn int, now time.Time) ([]Score, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	w := p.Weights.normalized()
	sims := similarity(cands, p.VectorWeight)
	var refs []refResult
	if w.References > 0 {
		refs = references(cands, all, shardsFor(all))
	}
	out := make([]Score, len(cands))
	for i := range cands {
		c := &cands[i]
		cs := Components{
			Similarity: sims[i],
			Recency:    recency(c, p, newestTurn, now),
		}
		if refs != nil {
			cs.References = refs[i].score
			out[i].Referenced = refs[i].top
		}
		if c.Important {
			cs.Importance = 1
		}
		if c.StatesTime && p.WhenBonus > 0 {
			cs.When = 1
		}
		t := w.Similarity*cs.Similarity + w.Recency*cs.Recency + w.References*cs.References + w.Importance*cs.Importance +
			p.WhenBonus*cs.When
		out[i].ID = c.ID
		out[i].Total = clamp01(t) // rounding can reach 1+ulp
		out[i].Components = cs
	}
	return out, nil
}

// similarity min-max normalises each side over the candidates and mixes
// them. A side on which every candidate scored the same says nothing about
// this prompt: it contributes 0, and the other side gets its share (so a
// session without vectors still spans [0,1]).
func similarity(cands []Candidate, vectorWeight float64) []float64 {
	bm := normalize(cands, func(c *Candidate) float64 { return max(finite(c.BM25), 0) })
	cos := normalize(cands, func(c *Candidate) float64 { return min(max(finite(c.Cosine), 0), 1) })
	out := make([]float64, len(cands))
	wv := vectorWeight
	switch {
	case bm == nil && cos == nil:
		return out
	case bm == nil:
		wv = 1
	case cos == nil:
		wv = 0
	}
	for i := range out {
		var s float64
		if bm != nil {
			s += (1 - wv) * bm[i]
		}
		if cos != nil {
			s += wv * cos[i]
		}
		out[i] = clamp01(s)
	}
	return out
}

// normalize maps f over cands to [0,1] by min-max; nil when every value is
// the same (there is no spread to scale).
func normalize(cands []Candidate, f func(*Candidate) float64) []float64 {
	if len(cands) == 0 {
		return nil
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range cands {
		v := f(&cands[i])
		lo, hi = min(lo, v), max(hi, v)
	}
	if !(hi > lo) {
		return nil
	}
	out := make([]float64, len(cands))
	for i := range cands {
		out[i] = (f(&cands[i]) - lo) / (hi - lo)
	}
	return out
}

// recency halves every HalfLifeTurns turns back from newestTurn and, when
// HalfLife is set, every HalfLife of age; the larger decay wins.
func recency(c *Candidate, p Params, newestTurn int, now time.Time) float64 {
	d := max(float64(newestTurn)-float64(c.Turn), 0)
	r := math.Exp2(-d / p.HalfLifeTurns)
	if p.HalfLife > 0 && !c.CreatedAt.IsZero() && !now.IsZero() {
		age := max(now.Sub(c.CreatedAt), 0)
		r = max(r, math.Exp2(-float64(age)/float64(p.HalfLife)))
	}
	return clamp01(r)
}

func finite(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return v
}

func clamp01(v float64) float64 { return min(max(v, 0), 1) }

// Explain renders a score as one line: the total, each component with its
// normalised weight, and the terms later messages repeated, e.g.
//
//	0.62 = 0.45*sim 0.80 + 0.25*rec 0.50 + 0.20*ref 0.30 + 0.10*imp 0 (referenced: err_conn_reset)
func Explain(s Score, p Params) string {
	w := p.Weights
	if sum := w.sum(); sum > 0 && !math.IsInf(sum, 0) {
		w = w.normalized()
	}
	c := s.Components
	line := fmt.Sprintf("%.2f = %.2f*sim %.2f + %.2f*rec %.2f + %.2f*ref %.2f + %.2f*imp %.0f",
		s.Total, w.Similarity, c.Similarity, w.Recency, c.Recency, w.References, c.References, w.Importance, c.Importance)
	if c.When > 0 {
		line += fmt.Sprintf(" + %.2f*when 1", p.WhenBonus)
	}
	if len(s.Referenced) > 0 {
		line += " (referenced: " + strings.Join(s.Referenced, ", ") + ")"
	}
	return line
}
