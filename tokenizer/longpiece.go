package tokenizer

import (
	"container/heap"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
	tiktoken_loader "github.com/pkoukk/tiktoken-go-loader"
)

// tiktoken-go merges a piece's byte pairs by scanning every pair for the
// lowest rank, once per merge: quadratic in the piece's length. Text splits
// into short pieces, except runs of one kind of character ("aaaa...",
// "!!!!...", long blank runs), which are one piece each: 80 KB of one
// letter took 17 s, and 1 MiB (within the content limit) would take hours.
// Text holding such a run is counted here instead, with the same split and
// the same merge order (lowest rank first, leftmost on ties) kept in a
// heap: O(n log n), the same count (checked against tiktoken-go in tests).

// longRun is the run length, in bytes, from which the heap merge is used.
const longRun = 256

// specs are tiktoken-go's split patterns and rank files for the encodings
// ctxd offers (tiktoken-go v0.1.8, encoding.go).
var specs = map[string]struct{ url, pattern string }{
	"o200k_base": {"https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
		`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
			`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|` +
			`\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
	"cl100k_base": {"https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
		`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
}

// hasLongRun reports whether text holds a run of longRun bytes or more of
// one character class the split keeps together.
func hasLongRun(text string) bool {
	if len(text) < longRun {
		return false
	}
	run, class := 0, -1
	for _, r := range text {
		c := charClass(r)
		if c != class {
			run, class = 0, c
		}
		run += utf8.RuneLen(max(r, 0))
		if run >= longRun && c != classDigit {
			return true
		}
	}
	return false
}

const (
	classLetter = iota
	classDigit
	classSpace
	classOther
)

func charClass(r rune) int {
	switch {
	case unicode.IsLetter(r) || unicode.Is(unicode.M, r):
		return classLetter
	case unicode.IsNumber(r):
		return classDigit
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// heapBPE counts tokens with tiktoken's split and a heap merge.
type heapBPE struct {
	ranks map[string]int
	split *regexp2.Regexp
}

func newHeapBPE(encoding string) (*heapBPE, error) {
	spec, ok := specs[encoding]
	if !ok {
		return nil, fmt.Errorf("no split pattern for %s", encoding)
	}
	ranks, err := tiktoken_loader.NewOfflineLoader().LoadTiktokenBpe(spec.url)
	if err != nil {
		return nil, fmt.Errorf("load ranks of %s: %w", encoding, err)
	}
	re, err := regexp2.Compile(spec.pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("compile split pattern of %s: %w", encoding, err)
	}
	return &heapBPE{ranks: ranks, split: re}, nil
}

// count is len(EncodeOrdinary(text)).
func (b *heapBPE) count(text string) (int, error) {
	runes := []rune(text)
	n := 0
	m, err := b.split.FindRunesMatch(runes)
	for m != nil && err == nil {
		piece := []byte(string(runes[m.Index : m.Index+m.Length]))
		if _, ok := b.ranks[string(piece)]; ok {
			n++
		} else {
			n += mergeCount(piece, b.ranks)
		}
		m, err = b.split.FindNextMatch(m)
	}
	if err != nil {
		return 0, fmt.Errorf("split text: %w", err)
	}
	return n, nil
}

// mergeCount is the number of tokens byte-pair merging leaves of piece:
// repeatedly merge the adjacent pair of lowest rank, leftmost first.
func mergeCount(piece []byte, ranks map[string]int) int {
	n := len(piece)
	if n <= 1 {
		return n
	}
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
		if r, ok := ranks[string(piece[i:next[j]])]; ok {
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
