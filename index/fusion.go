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
	// Ranks on each side from 1, 0 when that side did not find it.
	textRank, vecRank int
}

// merge joins both sides' candidates by id, with each side's scores min-max
// normalised over that side's candidates. A document one side did not find
// gets 0 from it. Each side's rank (from 1) is kept on the candidate.
func merge(ts []textCandidate, vs []vectorCandidate) []*candidate {
	// One allocation for all candidates, and a map only for the ids the
	// vector side may share with the text side: a search's garbage adds
	// up across calls.
	all := make([]candidate, 0, len(ts)+len(vs))
	out := make([]*candidate, 0, len(ts)+len(vs))
	byID := make(map[string]*candidate, len(ts))
	add := func(id string) *candidate {
		all = append(all, candidate{id: id})
		c := &all[len(all)-1]
		out = append(out, c)
		return c
	}
	lo, hi := bounds(len(ts), func(i int) float64 { return ts[i].score })
	for i, t := range ts {
		c := byID[t.id]
		if c == nil {
			c = add(t.id)
			byID[t.id] = c
		}
		c.text = scale(t.score, lo, hi)
		c.textHit = true
		c.textRank = i + 1
	}
	lo, hi = bounds(len(vs), func(i int) float64 { return vs[i].score })
	for i, v := range vs {
		c := byID[v.id]
		if c == nil {
			c = add(v.id)
		}
		c.vector = scale(v.score, lo, hi)
		c.session = v.session
		c.vecRank = i + 1
	}
	return out
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
	cs := merge(ts, vs)
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
			if c.textRank > 0 {
				s += 1 / (k + float64(c.textRank))
			}
			if c.vecRank > 0 {
				s += 1 / (k + float64(c.vecRank))
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
