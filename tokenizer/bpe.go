package tokenizer

import (
	"container/heap"
	"hash/maphash"
	"math"
	"strings"
	"sync/atomic"
)

// bpe counts tokens: split the text into pieces (split.go), then merge each
// piece's bytes by rank. A piece in the vocabulary is one token; most are.
type bpe struct {
	ranks  map[string]int
	split  splitter
	merged pieceCache
}

// count is len(tiktoken's EncodeOrdinary(text)) for valid UTF-8 text.
func (b *bpe) count(text string) int {
	n := 0
	for i := 0; i < len(text); {
		j := b.split(text, i)
		if j <= i {
			// Every character starts a piece; this guards the loop
			// against a splitter bug all the same.
			_, size := decode(text, i)
			j = i + size
		}
		piece := text[i:j]
		if _, ok := b.ranks[piece]; ok {
			n++
		} else {
			n += b.merged.count(piece, b.ranks)
		}
		i = j
	}
	return n
}

// pieceCache remembers the counts of recently merged pieces, as Hugging
// Face's BPE keeps a cache of words: the pieces outside the vocabulary
// (identifiers, names, made-up words) repeat within and across the tool
// outputs and logs agents write, and merging one costs dozens of rank
// lookups where the cache costs one hash. Direct-mapped, lock-free: a
// slot holds the last piece hashed to it, so the cache is bounded
// (pieceSlots entries of at most shortPiece bytes, about 2 MB when full).
type pieceCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[pieceCount]
}

type pieceCount struct {
	piece string
	n     int
}

const pieceSlots = 1 << 14

func newPieceCache() pieceCache {
	return pieceCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[pieceCount], pieceSlots)}
}

// count is mergeCount(piece, ranks), from the cache when piece is in it.
func (c *pieceCache) count(piece string, ranks map[string]int) int {
	if len(piece) > shortPiece || c.slots == nil {
		return mergeCount(piece, ranks)
	}
	slot := &c.slots[maphash.String(c.seed, piece)&(pieceSlots-1)]
	if e := slot.Load(); e != nil && e.piece == piece {
		return e.n
	}
	n := mergeCount(piece, ranks)
	// A copy: piece is a slice of the caller's text, which must not stay
	// in memory for it.
	slot.Store(&pieceCount{strings.Clone(piece), n})
	return n
}

// shortPiece is the longest piece merged by the quadratic scan: it needs no
// allocation, and beats the heap on the short pieces text is made of.
const shortPiece = 64

// mergeCount is the number of tokens byte-pair merging leaves of piece:
// repeatedly merge the adjacent pair of lowest rank, leftmost first.
func mergeCount(piece string, ranks map[string]int) int {
	if len(piece) <= 1 {
		return len(piece)
	}
	if len(piece) <= shortPiece {
		return mergeCountShort(piece, ranks)
	}
	return mergeCountHeap(piece, ranks)
}

// mergeCountShort is tiktoken's own merge loop (bytePairMerge): parts hold
// their start offset and the rank of merging with the next part.
func mergeCountShort(piece string, ranks map[string]int) int {
	var starts, pairRanks [shortPiece + 1]int
	n := len(piece) + 1 // parts, the last one the end sentinel
	for i := range n {
		starts[i], pairRanks[i] = i, math.MaxInt
	}
	rankOf := func(i, skip int) int {
		if i+skip+2 < n {
			if r, ok := ranks[piece[starts[i]:starts[i+skip+2]]]; ok {
				return r
			}
		}
		return math.MaxInt
	}
	for i := 0; i < n-2; i++ {
		pairRanks[i] = rankOf(i, 0)
	}
	for n > 1 {
		best, at := math.MaxInt, -1
		for i := 0; i < n-1; i++ {
			if pairRanks[i] < best {
				best, at = pairRanks[i], i
			}
		}
		if at < 0 {
			break
		}
		pairRanks[at] = rankOf(at, 1)
		if at > 0 {
			pairRanks[at-1] = rankOf(at-1, 1)
		}
		copy(starts[at+1:n-1], starts[at+2:n])
		copy(pairRanks[at+1:n-1], pairRanks[at+2:n])
		n--
	}
	return n - 1
}

// mergeCountHeap merges in the same order (lowest rank, leftmost on ties)
// with the pairs in a heap: O(n log n) where tiktoken-go's scan is
// quadratic. Long pieces are runs of one kind of character ("aaaa...",
// "!!!!...", long blank runs): 80 KB of one letter took tiktoken-go 17 s.
func mergeCountHeap(piece string, ranks map[string]int) int {
	n := len(piece)
	// Parts are linked by their start offsets; n is the end sentinel.
	next := make([]int32, n+1)
	prev := make([]int32, n+1)
	rank := make([]int32, n) // rank of the pair starting at part i; -1: none
	for i := range next {
		next[i], prev[i] = int32(i+1), int32(i-1)
	}
	pairRank := func(i int32) int32 {
		j := next[i]
		if int(j) >= n {
			return -1
		}
		if r, ok := ranks[piece[i:next[j]]]; ok {
			return int32(r)
		}
		return -1
	}
	rank[n-1] = -1
	h := &pairHeap{}
	for i := range int32(n - 1) {
		if rank[i] = pairRank(i); rank[i] >= 0 {
			*h = append(*h, pair{rank[i], i})
		}
	}
	heap.Init(h)
	parts := n
	for h.Len() > 0 {
		p := heap.Pop(h).(pair)
		if rank[p.pos] != p.rank {
			continue // the part changed since: a stale entry
		}
		i, j := p.pos, next[p.pos]
		next[i] = next[j]
		if int(next[j]) <= n {
			prev[next[j]] = i
		}
		rank[j] = -1
		parts--
		for _, k := range []int32{i, prev[i]} {
			if k < 0 {
				continue
			}
			if rank[k] = pairRank(k); rank[k] >= 0 {
				heap.Push(h, pair{rank[k], k})
			}
		}
	}
	return parts
}

type pair struct{ rank, pos int32 }

type pairHeap []pair

func (h pairHeap) Len() int { return len(h) }
func (h pairHeap) Less(a, b int) bool {
	return h[a].rank < h[b].rank || h[a].rank == h[b].rank && h[a].pos < h[b].pos
}
func (h pairHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *pairHeap) Push(x any)   { *h = append(*h, x.(pair)) }
func (h *pairHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
