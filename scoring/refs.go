package scoring

import (
	"cmp"
	"math"
	"slices"
)

// kindWeight is how strongly a later repetition of a term of each kind says
// that the later message refers back. Code-like terms are near-unique by
// construction; numbers collide by chance (ports, statuses, years); plain
// words collide most, so they also pass the rarity cut (rareIDF). An id
// mention is explicit, so one of them outweighs several shared identifiers.
var kindWeight = [...]float64{
	KindWord:    0.3,
	KindNumber:  0.5,
	KindQuote:   0.8,
	KindIdent:   1,
	KindPath:    1,
	KindURL:     1,
	KindMention: 3,
	kindField:   0,
}

const (
	// refScale is the evidence x at which references reaches 1-1/e. One
	// new identifier repeated once (x = 1) gives 0.49, two give 0.74, an
	// id mention alone (x = 3) 0.86.
	refScale = 1.5
	// rareIDF is the normalised IDF a plain word must exceed to count at
	// all; its weight then grows linearly to full at IDF 1 (a word only
	// this message and one later one share, in a long session). In a
	// session of N messages it admits words in at most about N^0.4
	// messages: 3 of 20, 14 of 788, 40 of 10,000.
	rareIDF = 0.6
	// Ids shorter than this match too much prose to count as mentions
	// (production ids are 26-character ULIDs).
	minIDLen = 4
	// maxReferenced is how many terms a Score names to explain itself.
	maxReferenced = 3
)

// gain is how much c later messages repeating a term count compared with
// one: 1, 1.5, 1.75, ... never 2. Bounded, so that a term every later
// message repeats (a project name) counts no more than two that one does.
func gain(c int32) float64 {
	if int(c) < len(gains) {
		return gains[c]
	}
	return 2
}

var gains [64]float64

func init() {
	for c := 1; c < len(gains); c++ {
		gains[c] = 2 - math.Exp2(float64(1-c))
	}
}

// refResult is the references component of one candidate.
type refResult struct {
	score float64
	top   []string
}

// references scores every candidate by how much the session's messages
// after it repeat its distinctive terms. It walks the session from the
// newest message back, keeping for every term the number of messages seen
// so far (all later than the candidate at hand), so the whole is linear in
// the number of terms.
func references(cands []Candidate, all []Doc, shards int) []refResult {
	out := make([]refResult, len(cands))
	if len(all) == 0 || len(cands) == 0 {
		return out
	}
	x := buildIndex(all, cands, shards)
	defer x.release()
	n := len(all)

	docs := newestFirst(n, func(i int) int { return all[i].Turn })
	order := newestFirst(len(cands), func(i int) int { return cands[i].Turn })

	// Each candidate's entries: its message's when the session holds it
	// (same id, turn and text), else its own text's, looked up only: a term
	// no message of the session has cannot be in a later one.
	type span struct{ lo, hi int32 }
	spans := make([]span, len(cands))
	for i := range cands {
		c := &cands[i]
		d := findDoc(all, docs, c)
		if d >= 0 {
			spans[i] = span{x.starts[d], x.starts[d+1]}
			continue
		}
		lo := int32(len(x.flat))
		x.addDoc(int32(n+i), c.Text)
		spans[i] = span{lo, int32(len(x.flat))}
	}

	// idf normalised to (0,1]: 1 for a term in one message.
	idf := make([]float64, n+1)
	norm := math.Log1p(float64(n))
	for df := 1; df <= n; df++ {
		idf[df] = math.Log1p(float64(n)/float64(df)) / norm
	}
	idf[0] = 1

	stats := x.stats
	names := map[uint32]string{} // candidates often share referenced terms
	next := 0
	var top topTerms
	for _, ci := range order {
		c := &cands[ci]
		for ; next < n && all[docs[next]].Turn > c.Turn; next++ {
			d := docs[next]
			for _, e := range x.flat[x.starts[d]:x.starts[d+1]] {
				stats[e>>4].later++
			}
		}
		top = top[:0]
		var sum float64
		for _, e := range x.flat[spans[ci].lo:spans[ci].hi] {
			tid, k := e>>4, Kind(e&15)
			st := stats[tid]
			cnt := st.later
			if cnt == 0 || k == KindMention { // a mention of another message is not this one's term
				continue
			}
			// How distinctive the term is. Code-like terms: by the messages
			// that used it up to this one, so the message that brought an
			// identifier in gets the credit and more repeats never lower it.
			// Words and numbers collide by chance: by the whole session.
			df := st.df
			if k != KindWord && k != KindNumber {
				df -= cnt
			}
			w := idf[min(max(int(df), 1), n)]
			if k == KindWord {
				if w <= rareIDF {
					continue
				}
				w = (w - rareIDF) / (1 - rareIDF)
			}
			v := kindWeight[k] * w * gain(cnt)
			sum += v
			top.add(tid, v)
		}
		if tid := x.candMention[ci]; tid != 0 && stats[tid].later > 0 {
			v := kindWeight[KindMention] * gain(stats[tid].later)
			sum += v
			top.add(tid, v)
		}
		out[ci].score = 1 - math.Exp(-sum/refScale)
		if len(top) > 0 {
			out[ci].top = make([]string, len(top))
			for i, t := range top {
				name, ok := names[t.tid]
				if !ok {
					name = string(x.term(t.tid))
					names[t.tid] = name
				}
				out[ci].top[i] = name
			}
		}
	}
	return out
}

// newestFirst returns 0..n-1 ordered by decreasing turn (ties in any
// order: they count alike). Sessions come in order, so that is usually a
// plain reversal.
func newestFirst(n int, turn func(int) int) []int {
	out := make([]int, n)
	sorted := true
	for i := range out {
		out[i] = n - 1 - i
		sorted = sorted && (i == 0 || turn(i-1) <= turn(i))
	}
	if sorted {
		return out
	}
	for i := range out {
		out[i] = i
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(turn(b), turn(a)) })
	return out
}

// findDoc returns the index in all of the message that is candidate c, or
// -1; docs is all's indices newest first.
func findDoc(all []Doc, docs []int, c *Candidate) int {
	j, _ := slices.BinarySearchFunc(docs, c.Turn, func(d, turn int) int { return cmp.Compare(turn, all[d].Turn) })
	for ; j < len(docs) && all[docs[j]].Turn == c.Turn; j++ {
		if d := &all[docs[j]]; d.ID == c.ID && d.Text == c.Text {
			return docs[j]
		}
	}
	return -1
}

// topTerms keeps the maxReferenced strongest contributions, strongest first.
type topTerms []refTerm

type refTerm struct {
	tid uint32
	v   float64
}

func (t *topTerms) add(tid uint32, v float64) {
	s := *t
	if len(s) == maxReferenced && v <= s[len(s)-1].v {
		return
	}
	if len(s) < maxReferenced {
		s = append(s, refTerm{})
	}
	i := len(s) - 1
	for i > 0 && s[i-1].v < v {
		s[i] = s[i-1]
		i--
	}
	s[i] = refTerm{tid, v}
	*t = s
}
