package glove

import (
	"math"
	"sync"

	"github.com/ctxd/ctxd/internal/simd"
)

// Neighbour is a word near another in the vector space.
type Neighbour struct {
	Word string
	Cos  float32
}

// nbEntry is a cached scan: the best limit neighbours of a word.
type nbEntry struct {
	limit int
	list  []Neighbour
}

// neighbourCacheSize bounds the cache at a few MB: an entry is usually
// cachedNeighbours words, enough for any sensible query expansion.
const (
	neighbourCacheSize = 4096
	cachedNeighbours   = 32
)

// Neighbours returns up to n words nearest to word by cosine, best first, with
// cosine at least minCos: candidates for query expansion. Stopwords and
// punctuation are never returned; an unknown word has none. A scan over every
// row costs a millisecond or more, so results are cached (bounded; an
// arbitrary entry is dropped when full). The returned slice is the caller's.
func (m *Model) Neighbours(word string, n int, minCos float32) []Neighbour {
	if n <= 0 {
		return nil
	}
	word = lowerWord(word)
	id, ok := m.index[word]
	if !ok {
		return nil
	}
	m.nbMu.Lock()
	e, hit := m.nbCache[word]
	m.nbMu.Unlock()
	// A list shorter than the scan's limit holds every candidate there is.
	if !hit || (n > e.limit && len(e.list) == e.limit) {
		e = nbEntry{limit: max(n, cachedNeighbours)}
		e.list = m.scanNeighbours(id, e.limit)
		m.nbMu.Lock()
		if _, replace := m.nbCache[word]; !replace && len(m.nbCache) >= neighbourCacheSize {
			for k := range m.nbCache {
				delete(m.nbCache, k)
				break
			}
		}
		m.nbCache[word] = e
		m.nbMu.Unlock()
	}
	list := e.list
	out := make([]Neighbour, 0, min(n, len(list)))
	for _, nb := range list {
		if len(out) == n || nb.Cos < minCos {
			break
		}
		out = append(out, nb)
	}
	return out
}

// scanNeighbours compares the word with every content word. The int8 rows are
// compared directly: the per-row scales cancel out of a cosine.
func (m *Model) scanNeighbours(id int32, n int) []Neighbour {
	m.normsOnce.Do(m.computeNorms)
	if !simd.Enabled {
		return m.scanEach(id, n)
	}
	return m.scanPacked(id, n)
}

// scanPacked scores every row in one call of the AVX2 kernel over the packed
// rows, then selects. It gives scanEach's list: the dot products are exact
// integers either way and the cosines come from the same expression. At 100k
// 100-d rows a scan took 1.1-1.8 ms instead of scanEach's 9-11 ms, CPU and
// wall alike (BenchmarkNeighbours on the shared 2-core machine): the kernel
// reads the 10 MB of rows at ~0.11 ns a byte, and selecting costs ~0.2 ms.
// Codes are within ±128, so the int32 sums are exact below 131,072
// dimensions, as in scanEach.
func (m *Model) scanPacked(id int32, n int) []Neighbour {
	m.rowsOnce.Do(m.packRows)
	dim := m.dim
	q := make([]int16, dim)
	for k, c := range m.rows[int(id)*dim : (int(id)+1)*dim] {
		q[k] = int16(c)
	}
	buf := accBufs.Get().(*[]int32)
	defer accBufs.Put(buf)
	if cap(*buf) < len(m.words) {
		*buf = make([]int32, len(m.words))
	}
	acc := (*buf)[:len(m.words)]
	simd.DotRowsInt8(q, m.rows, acc)
	qn := m.invNorm[id]
	top := make(topCands, 0, n+1)
	for i, a := range acc {
		if int32(i) == id || m.kind[i] != kindContent {
			continue
		}
		top.offer(int32(i), float32(a)*qn*m.invNorm[i], n)
	}
	return m.neighbours(top)
}

// accBufs holds the dot products of scans: 400 KB at 100k rows (one buffer
// per concurrent scan), not worth allocating on every cache miss.
var accBufs = sync.Pool{New: func() any { return new([]int32) }}

// scanEach is the scan in Go, a row at a time: where there is no assembly,
// and the reference that scanPacked must match.
func (m *Model) scanEach(id int32, n int) []Neighbour {
	q := widen(m.f.Row(int(id)))
	qn := m.invNorm[id]
	top := make(topCands, 0, n+1)
	for i := range m.words {
		if int32(i) == id || m.kind[i] != kindContent {
			continue
		}
		top.offer(int32(i), float32(dotInt8(q, m.f.Row(i)))*qn*m.invNorm[i], n)
	}
	return m.neighbours(top)
}

// topCands is a scan's best rows so far, best first.
type topCands []cand

type cand struct {
	id  int32
	cos float32
}

// offer keeps row id if it is among the best n. Rows come in frequency
// order and a tie keeps the row already there: the more frequent word.
func (t *topCands) offer(id int32, cos float32, n int) {
	top := *t
	if len(top) == n && cos <= top[n-1].cos {
		return
	}
	// Insertion into a short sorted list.
	j := len(top)
	top = append(top, cand{})
	for j > 0 && top[j-1].cos < cos {
		top[j] = top[j-1]
		j--
	}
	top[j] = cand{id, cos}
	if len(top) > n {
		top = top[:n]
	}
	*t = top
}

func (m *Model) neighbours(top topCands) []Neighbour {
	out := make([]Neighbour, len(top))
	for i, c := range top {
		out[i] = Neighbour{Word: m.words[c.id], Cos: c.cos}
	}
	return out
}

// packRows copies every row's codes into m.rows.
func (m *Model) packRows() {
	dim := m.dim
	m.rows = make([]int8, len(m.words)*dim)
	for i := range m.words {
		dst := m.rows[i*dim : (i+1)*dim]
		for k, c := range m.f.Row(i) {
			dst[k] = int8(c)
		}
	}
}

func (m *Model) computeNorms() {
	m.invNorm = make([]float32, len(m.words))
	for i := range m.words {
		var ss int32
		for _, c := range m.f.Row(i) {
			ss += int32(int8(c)) * int32(int8(c))
		}
		if ss > 0 {
			m.invNorm[i] = float32(1 / math.Sqrt(float64(ss)))
		}
	}
}

// dotInt8 is the dot product of a row widened to int32 and a row of int8
// values stored as bytes. Widening one side once and keeping four independent
// sums make the scan about a third faster than the plain loop.
func dotInt8(q []int32, b []byte) int32 {
	b = b[:len(q)]
	var s0, s1, s2, s3 int32
	i := 0
	for ; i+4 <= len(q); i += 4 {
		s0 += q[i] * int32(int8(b[i]))
		s1 += q[i+1] * int32(int8(b[i+1]))
		s2 += q[i+2] * int32(int8(b[i+2]))
		s3 += q[i+3] * int32(int8(b[i+3]))
	}
	for ; i < len(q); i++ {
		s0 += q[i] * int32(int8(b[i]))
	}
	return s0 + s1 + s2 + s3
}

// widen returns an int8 row as int32 values.
func widen(row []byte) []int32 {
	q := make([]int32, len(row))
	for k, c := range row {
		q[k] = int32(int8(c))
	}
	return q
}
