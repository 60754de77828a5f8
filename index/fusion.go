package index

import (
	"cmp"
	"slices"
	"strings"
)

// Fusion methods.
const (
	// FusionMinMax scales each side's scores to [0,1] over the query's
	// candidates and mixes them (1-w)*text + w*vector. RETRIEVAL.md measured it
	// above RRF on LoCoMo (62.3 vs 55.0 R@10 with k=60).
	FusionMinMax = "minmax"
	// FusionRRF is reciprocal rank fusion, sum of 1/(k+rank), scaled so that
	// first on both sides is 1. It ignores VectorWeight.
	FusionRRF = "rrf"
)

// candidate is one document after fusion.
type candidate struct {
	id, session  string // session is "" for a text-only hit until it is loaded
	text, vector float64
	score        float64
	textHit      bool // found by the text side: its snippet shows the matched words
}

// merge joins both sides' candidates by id, with each side's scores min-max
// normalised over that side's candidates. A document one side did not find
// gets 0 from it.
func merge(ts []textCandidate, vs []vectorCandidate) ([]*candidate, map[string]int, map[string]int) {
	byID := make(map[string]*candidate, len(ts)+len(vs))
	out := make([]*candidate, 0, len(ts)+len(vs))
	textRank := make(map[string]int, len(ts))
	vecRank := make(map[string]int, len(vs))
	get := func(id string) *candidate {
		c := byID[id]
		if c == nil {
			c = &candidate{id: id}
			byID[id] = c
			out = append(out, c)
		}
		return c
	}
	lo, hi := bounds(len(ts), func(i int) float64 { return ts[i].score })
	for i, t := range ts {
		c := get(t.id)
		c.text = scale(t.score, lo, hi)
		c.textHit = true
		textRank[t.id] = i + 1
	}
	lo, hi = bounds(len(vs), func(i int) float64 { return vs[i].score })
	for i, v := range vs {
		c := get(v.id)
		c.vector = scale(v.score, lo, hi)
		c.session = v.session
		vecRank[v.id] = i + 1
	}
	return out, textRank, vecRank
}

func bounds(n int, score func(int) float64) (lo, hi float64) {
	for i := range n {
		s := score(i)
		if i == 0 || s < lo {
			lo = s
		}
		if i == 0 || s > hi {
			hi = s
		}
	}
	return lo, hi
}

// scale maps s from [lo,hi] to [0,1]; when every candidate scored the same
// they are all equally the best.
func scale(s, lo, hi float64) float64 {
	if hi <= lo {
		return 1
	}
	return (s - lo) / (hi - lo)
}

// fuse merges both sides and ranks the result, best first.
func fuse(ts []textCandidate, vs []vectorCandidate, opts *Options) []*candidate {
	cs, textRank, vecRank := merge(ts, vs)
	switch {
	case len(vs) == 0:
		for _, c := range cs {
			c.score = c.text
		}
	case len(ts) == 0:
		for _, c := range cs {
			c.score = c.vector
		}
	case opts.Fusion == FusionRRF:
		k := float64(opts.RRFK)
		best := 2 / (k + 1)
		for _, c := range cs {
			var s float64
			if r, ok := textRank[c.id]; ok {
				s += 1 / (k + float64(r))
			}
			if r, ok := vecRank[c.id]; ok {
				s += 1 / (k + float64(r))
			}
			c.score = s / best
		}
	default:
		w := opts.VectorWeight
		for _, c := range cs {
			c.score = (1-w)*c.text + w*c.vector
		}
	}
	slices.SortFunc(cs, func(a, b *candidate) int {
		if a.score != b.score {
			return cmp.Compare(b.score, a.score)
		}
		if a.text != b.text {
			return cmp.Compare(b.text, a.text)
		}
		return strings.Compare(a.id, b.id)
	})
	return cs
}
