package scoring

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
)

// A context call scores its session's whole window, and scanning every
// message's text for its terms was a fifth of the call's CPU, every call,
// for messages that had not changed. docTerms keeps each text's scan: the
// distinct (term, kind) pairs in the order the scanner first emitted them,
// which, handed to refIndex.add, build exactly what the scan does (add
// keeps a term's first place in the document and its strongest kind, so
// repeats change nothing).
//
// Entries are keyed by the text's hash and length and by the id lengths the
// scanner was told (it hands whole fields of those lengths to the id
// matcher), so a changed text is a new entry and the cache needs no
// invalidation. Two generations bound it by bytes, as the store's decode
// cache does.
type termCache struct {
	seed maphash.Seed

	mu         sync.Mutex
	cur, prev  map[termKey][]byte
	curBytes   int
	limitBytes int // per generation
}

type termKey struct {
	hash         uint64
	n            int
	idMin, idMax int
}

// termCacheBytes bounds each generation by termEntryBytes: a chat turn's
// entry is a few hundred bytes, so 32 MiB holds the windows of a hundred
// sessions of 1,000 messages, where 8 MiB missed most of them and a
// context call spent a tenth of its CPU scanning again.
const termCacheBytes = 32 << 20

// docTerms is the process's; nil scans every time (tests compare).
var docTerms = newTermCache(termCacheBytes)

func newTermCache(limit int) *termCache {
	return &termCache{seed: maphash.MakeSeed(), cur: map[termKey][]byte{}, prev: map[termKey][]byte{}, limitBytes: limit}
}

func (c *termCache) key(text string, idMin, idMax int) termKey {
	return termKey{hash: maphash.String(c.seed, text), n: len(text), idMin: idMin, idMax: idMax}
}

func (c *termCache) get(k termKey) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[k]
	if !ok {
		if e, ok = c.prev[k]; ok {
			delete(c.prev, k)
			c.add(k, e)
		}
	}
	return e, ok
}

func (c *termCache) put(k termKey, e []byte) {
	if termEntryBytes(e) > c.limitBytes/16 {
		return // one huge text would push out many small ones
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.cur[k]; ok {
		c.curBytes -= termEntryBytes(old)
	}
	c.add(k, e)
}

// add puts e in the current generation, first turning a full one into the
// previous one; c.mu is held.
func (c *termCache) add(k termKey, e []byte) {
	if c.curBytes+termEntryBytes(e) > c.limitBytes {
		c.prev, c.cur, c.curBytes = c.cur, map[termKey][]byte{}, 0
	}
	c.cur[k] = e
	c.curBytes += termEntryBytes(e)
}

// termEntryBytes is what an entry holds: its scan, and the map's slot with
// the key and the slice header, which a short text's scan (empty for one
// with no terms) is smaller than.
func termEntryBytes(e []byte) int {
	return 64 + len(e)
}

// scanTerms is text's entry: for each distinct (term, kind) the scanner
// emits, in order, the kind, the term's length (uvarint) and the term.
func scanTerms(text string, idMin, idMax int, buf []byte) []byte {
	var out []byte
	seen := map[string]uint16{} // term → kinds seen, a bit each
	sc := scanner{idMin: idMin, idMax: idMax, buf: buf, emit: func(key []byte, k Kind) {
		if seen[string(key)]&(1<<k) != 0 {
			return
		}
		seen[string(key)] |= 1 << k
		out = append(out, byte(k))
		out = binary.AppendUvarint(out, uint64(len(key)))
		out = append(out, key...)
	}}
	sc.scan(text)
	if out == nil {
		out = []byte{} // scanned, and nothing in it
	}
	return out
}
