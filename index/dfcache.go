package index

import "sync"

// dfCache holds document frequencies by field and term as of one write
// generation of the index (Index.writes): until the next Apply they cannot
// change. Every search looks up each of its words to prune common ones, and
// a context call searches twice for the same prompt: opening a term reader
// per word and segment was a twentieth of what a call allocated.
type dfCache struct {
	gen   uint64
	mu    sync.Mutex
	df    map[string]uint64 // by field, 0, term
	bytes int               // the keys' bytes and dfEntry each
	key   []byte            // get's scratch, under mu
}

// maxDFBytes bounds a generation's cache by its keys' bytes (it was 50,000
// terms, whatever their length: a term may be a long identifier or path);
// past it, terms are looked up every time (an index between writes does not
// see that many words).
const maxDFBytes = 4 << 20

// dfEntry is what a term costs the cache beside its key's bytes.
const dfEntry = 48

// dfs returns the cache of the current write generation.
func (x *Index) dfs() *dfCache {
	gen := x.writes.Load()
	c := x.dfCache.Load()
	if c != nil && c.gen == gen {
		return c
	}
	n := &dfCache{gen: gen, df: map[string]uint64{}}
	if x.dfCache.CompareAndSwap(c, n) {
		return n
	}
	if c = x.dfCache.Load(); c != nil && c.gen == gen {
		return c // another search made it first
	}
	return n // a write came meanwhile: this search's own
}

func (c *dfCache) get(field string, term []byte) (uint64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.key = dfKey(c.key[:0], field, term)
	df, ok := c.df[string(c.key)]
	return df, ok
}

func dfKey(buf []byte, field string, term []byte) []byte {
	return append(append(append(buf, field...), 0), term...)
}

// put records term's df. It may come from a reader opened after a write
// that c's generation predates: the search that reads it back could as well
// have opened that reader itself.
func (c *dfCache) put(field string, term []byte, df uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := dfKey(c.key[:0], field, term)
	c.key = k
	if _, ok := c.df[string(k)]; ok || c.bytes+len(k)+dfEntry > maxDFBytes {
		return
	}
	c.df[string(k)] = df
	c.bytes += len(k) + dfEntry
}
