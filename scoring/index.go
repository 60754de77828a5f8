package scoring

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// refIndex holds every message's distinct terms as interned term ids, for
// the references component. Each entry of flat packs a term id and its
// kind. Term id 0 is the stopword sink; 1..mentions are the candidates' id
// mentions; the vocabulary follows.
type refIndex struct {
	vocab  *termTable
	text   []byte     // every term's text, end to end
	ends   []uint32   // term t's text is text[ends[t-1]:ends[t]]; "@id" for a mention
	hashes []uint64   // by term id, to merge shards without hashing again
	stats  []termStat // by term id
	seen   []seen     // by term id: where it was last added, to dedupe
	flat   []uint32   // term id << 4 | kind
	starts []int32    // document d holds flat[starts[d]:starts[d+1]]

	ids          map[string]uint32 // lower-case message id → mention term id
	candMention  []uint32          // by candidate: its mention term id, 0 if none
	idMin, idMax int
	mentions     uint32 // term ids 1..mentions are mentions

	cur      int32 // the document being added
	counting bool  // adding the session's documents: intern new terms
	sc       scanner
}

// termStat counts the messages holding a term: all of the session's, and
// (filled by references) those later than the candidate at hand. Together,
// so that reading both costs one cache miss.
type termStat struct{ df, later int32 }

// seen is where a term was last added: by which document, and where in
// flat. Together, so that checking costs one cache miss.
type seen struct{ doc, pos int32 }

const (
	stopTerm = 0
	// maxTerms keeps term ids within flat's 28 bits. No session comes near.
	maxTerms = 1<<28 - 1
)

// Shards below this much text are not worth a goroutine.
const minShardBytes = 256 << 10

// shardsFor is how many goroutines tokenize a session.
func shardsFor(all []Doc) int {
	size := 0
	for _, d := range all {
		size += len(d.Text)
	}
	return max(1, min(runtime.GOMAXPROCS(0), size/minShardBytes, 16))
}

// buildIndex tokenizes the session in shards, in parallel: each shard
// interns into its own table, then they are merged into the first by hash,
// which touches each shard's vocabulary once rather than each of its terms.
func buildIndex(all []Doc, cands []Candidate, shards int) *refIndex {
	ids := map[string]uint32{}
	idMin, idMax := math.MaxInt, 0
	var names [][]byte
	candMention := make([]uint32, len(cands))
	for i, c := range cands {
		if len(c.ID) < minIDLen || len(c.ID) > maxField {
			continue
		}
		key := strings.ToLower(c.ID)
		if tid, ok := ids[key]; ok {
			candMention[i] = tid
			continue
		}
		names = append(names, []byte("@"+c.ID))
		ids[key] = uint32(len(names))
		candMention[i] = uint32(len(names))
		idMin, idMax = min(idMin, len(key)), max(idMax, len(key))
	}
	size := 0
	for _, d := range all {
		size += len(d.Text)
	}
	shards = max(1, min(shards, len(all)))
	parts := make([]*refIndex, shards)
	seed := maphash.MakeSeed()
	var wg sync.WaitGroup
	lo, acc := 0, 0
	for s := range shards {
		// Split by bytes, so shards take about as long.
		hi, want := lo, size*(s+1)/shards
		for hi < len(all) && (acc < want || s == shards-1) {
			acc += len(all[hi].Text)
			hi++
		}
		x := newRefIndex(seed, ids, idMin, idMax, names, (hi-lo)*64)
		parts[s] = x
		docs, base := all[lo:hi], lo
		wg.Go(func() {
			for i, d := range docs {
				x.addDoc(int32(base+i), d.Text)
			}
		})
		lo = hi
	}
	wg.Wait()
	x := parts[0]
	x.starts = append(x.starts, int32(len(x.flat)))
	for _, p := range parts[1:] {
		x.merge(p)
		p.release()
	}
	x.counting = false
	x.candMention = candMention
	x.stats = slices.Grow(x.stats[:0], len(x.ends))[:len(x.ends)]
	clear(x.stats)
	for _, e := range x.flat {
		x.stats[e>>4].df++
	}
	return x
}

// refIndexes keeps the buffers of finished indexes: a context call builds
// two, and their tables and term lists were a fifth of what it allocated.
var refIndexes = sync.Pool{New: func() any { return new(refIndex) }}

func newRefIndex(seed maphash.Seed, ids map[string]uint32, idMin, idMax int, names [][]byte, terms int) *refIndex {
	x := refIndexes.Get().(*refIndex)
	buf := x.sc.buf[:0]
	if buf == nil {
		buf = make([]byte, 0, 64)
	}
	*x = refIndex{
		vocab:    x.vocab.reset(seed, terms/32),
		text:     x.text[:0],
		ends:     x.ends[:0],
		hashes:   x.hashes[:0],
		stats:    x.stats[:0],
		seen:     x.seen[:0],
		flat:     slices.Grow(x.flat[:0], terms),
		starts:   x.starts[:0],
		ids:      ids,
		idMin:    idMin,
		idMax:    idMax,
		mentions: uint32(len(names)),
		counting: true,
	}
	x.sc = scanner{emit: x.add, idMin: idMin, idMax: idMax, buf: buf}
	x.newTerm(nil, 0)
	for _, n := range names {
		x.newTerm(n, 0)
	}
	for w := range stopwords {
		x.vocab.put([]byte(w), stopTerm)
	}
	return x
}

// release hands x's buffers to the next index; x must not be used after.
func (x *refIndex) release() {
	x.ids, x.candMention, x.sc = nil, nil, scanner{buf: x.sc.buf}
	refIndexes.Put(x)
}

func (x *refIndex) newTerm(w []byte, h uint64) uint32 {
	tid := uint32(len(x.ends))
	x.text = append(x.text, w...)
	x.ends = append(x.ends, uint32(len(x.text)))
	x.hashes = append(x.hashes, h)
	x.seen = append(x.seen, seen{-1, 0})
	return tid
}

func (x *refIndex) term(tid uint32) []byte {
	var start uint32
	if tid > 0 {
		start = x.ends[tid-1]
	}
	return x.text[start:x.ends[tid]]
}

// addDoc appends the distinct terms of text as document d, from the
// scan docTerms keeps of it.
func (x *refIndex) addDoc(d int32, text string) {
	if x.counting {
		x.starts = append(x.starts, int32(len(x.flat)))
	}
	x.cur = d
	if docTerms == nil {
		x.sc.scan(text)
		return
	}
	k := docTerms.key(text, x.sc.idMin, x.sc.idMax)
	e, ok := docTerms.get(k)
	if !ok {
		e = scanTerms(text, x.sc.idMin, x.sc.idMax, x.sc.buf)
		docTerms.put(k, e)
	}
	for len(e) > 0 {
		kind := Kind(e[0])
		n, w := binary.Uvarint(e[1:])
		e = e[1+w:]
		x.add(e[:n], kind)
		e = e[n:]
	}
}

// add is the scanner's emit.
func (x *refIndex) add(key []byte, k Kind) {
	if (k == kindField || k == KindIdent) && len(key) >= x.idMin && len(key) <= x.idMax {
		if tid, ok := x.ids[string(key)]; ok {
			x.put(tid, KindMention)
		}
	}
	if k == kindField {
		return
	}
	h := x.vocab.hash(key)
	tid, slot, ok := x.vocab.find(h)
	if tid == stopTerm && ok {
		return
	}
	if !ok {
		if !x.counting || len(x.ends) > maxTerms {
			return // in no message of the session, so in no later one
		}
		tid = x.newTerm(key, h)
		x.vocab.insert(h, slot, tid)
	}
	x.put(tid, k)
}

func (x *refIndex) put(tid uint32, k Kind) {
	s := &x.seen[tid]
	if s.doc == x.cur {
		if kindWeight[k] > kindWeight[Kind(x.flat[s.pos]&15)] {
			x.flat[s.pos] = tid<<4 | uint32(k)
		}
		return
	}
	*s = seen{x.cur, int32(len(x.flat))}
	x.flat = append(x.flat, tid<<4|uint32(k))
}

// merge appends shard p's documents, which follow x's, re-numbering p's
// vocabulary into x's.
func (x *refIndex) merge(p *refIndex) {
	remap := make([]uint32, len(p.ends))
	for t := range remap {
		if t <= int(p.mentions) {
			remap[t] = uint32(t) // the sink and mentions are numbered alike
			continue
		}
		h := p.hashes[t]
		tid, slot, ok := x.vocab.find(h)
		if !ok && len(x.ends) > maxTerms {
			tid, ok = stopTerm, true // dropped below
		}
		if !ok {
			tid = x.newTerm(p.term(uint32(t)), h)
			x.vocab.insert(h, slot, tid)
		}
		remap[t] = tid
	}
	x.starts = x.starts[:len(x.starts)-1] // the end mark: p's documents go on
	for d, lo := range p.starts {
		hi := int32(len(p.flat))
		if d+1 < len(p.starts) {
			hi = p.starts[d+1]
		}
		x.starts = append(x.starts, int32(len(x.flat)))
		for _, e := range p.flat[lo:hi] {
			if tid := remap[e>>4]; tid != stopTerm {
				x.flat = append(x.flat, tid<<4|e&15)
			}
		}
	}
	x.starts = append(x.starts, int32(len(x.flat)))
}
