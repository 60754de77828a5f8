package summarize

import (
	"math"
	"slices"
)

// vec is a unit vector (or zero), dense when ids is nil, else sparse with
// ids ascending.
type vec struct {
	ids []int32
	ws  []float64
}

// space holds one vector per unit, for centrality and redundancy.
type space struct {
	vecs []vec
	dim  int
}

// embedSpace wraps an embedder's vectors, normalised again: the interface
// promises unit vectors, a wrong embedder should not skew the scores.
func embedSpace(vs [][]float32) *space {
	s := &space{vecs: make([]vec, len(vs))}
	for i, v := range vs {
		ws := make([]float64, len(v))
		for j, x := range v {
			ws[j] = float64(x)
		}
		normalizeVec(ws)
		s.vecs[i] = vec{ws: ws}
		s.dim = max(s.dim, len(v))
	}
	return s
}

// termSpace builds sparse tf-idf vectors with term ids in order of first
// appearance. Sparse because a long run has tens of thousands of terms;
// ordered so sums run in the same order every time (summing in map order
// would make scores, and so ties, vary between runs).
func termSpace(texts []string) *space {
	ids := map[string]int32{}
	docs := make([][]int32, len(texts))
	var df []int
	for i, t := range texts {
		for _, w := range terms(t) {
			id, ok := ids[w]
			if !ok {
				id = int32(len(ids))
				ids[w] = id
				df = append(df, 0)
			}
			docs[i] = append(docs[i], id)
		}
		slices.Sort(docs[i])
		for j, id := range docs[i] {
			if j == 0 || docs[i][j-1] != id {
				df[id]++
			}
		}
	}
	n := float64(len(texts))
	s := &space{vecs: make([]vec, len(texts)), dim: len(ids)}
	for i, d := range docs {
		var v vec
		for j, id := range d {
			w := math.Log(1 + n/float64(df[id]))
			if j > 0 && d[j-1] == id {
				v.ws[len(v.ws)-1] += w
				continue
			}
			v.ids = append(v.ids, id)
			v.ws = append(v.ws, w)
		}
		normalizeVec(v.ws)
		s.vecs[i] = v
	}
	return s
}

func normalizeVec(ws []float64) {
	var sum float64
	for _, x := range ws {
		sum += x * x
	}
	if sum == 0 {
		return
	}
	n := math.Sqrt(sum)
	for j := range ws {
		ws[j] /= n
	}
}

// centrality is each vector's cosine to the centroid of all: how typical a
// sentence is of the run. A few dozen lines instead of TextRank, and on
// short runs the two rank nearly alike.
func (s *space) centrality() []float64 {
	c := make([]float64, s.dim)
	for _, v := range s.vecs {
		for j, w := range v.ws {
			c[v.index(j)] += w
		}
	}
	var cn float64
	for _, x := range c {
		cn += x * x
	}
	cn = math.Sqrt(cn)
	out := make([]float64, len(s.vecs))
	if cn == 0 {
		return out
	}
	for i, v := range s.vecs {
		var dot float64
		for j, w := range v.ws {
			dot += w * c[v.index(j)]
		}
		out[i] = dot / cn
	}
	return out
}

func (v vec) index(j int) int {
	if v.ids == nil {
		return j
	}
	return int(v.ids[j])
}

// sim is the cosine of units i and j.
func (s *space) sim(i, j int) float64 {
	a, b := s.vecs[i], s.vecs[j]
	var dot float64
	if a.ids == nil || b.ids == nil {
		for k := range min(len(a.ws), len(b.ws)) {
			dot += a.ws[k] * b.ws[k]
		}
		return dot
	}
	for x, y := 0, 0; x < len(a.ids) && y < len(b.ids); {
		switch {
		case a.ids[x] < b.ids[y]:
			x++
		case a.ids[x] > b.ids[y]:
			y++
		default:
			dot += a.ws[x] * b.ws[y]
			x++
			y++
		}
	}
	return dot
}

// normalize maps xs onto [0, 1] so centrality weighs the same whatever the
// embedder's spread of cosines; all equal maps to 0.5.
func normalize(xs []float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	for i, x := range xs {
		if hi-lo < 1e-12 {
			xs[i] = 0.5
		} else {
			xs[i] = (x - lo) / (hi - lo)
		}
	}
}
