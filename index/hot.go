package index

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/philippgille/chromem-go"
)

// Hot sessions: a search in one session with no filter (an agent's memory
// search, a session's hybrid search) is answered by a chromem-go
// collection of that session, built from its rows on first need and kept
// for the most recently searched sessions only, within a bound in bytes.
// Every other session stays in int8 rows alone, so memory grows with the
// sessions in use, not with the store: a hot session costs its float32 rows
// once more (400 B a row at 100 dimensions) and chromem-go's document for
// each. A bound in sessions let that grow with the sessions' length: 64 hot
// sessions of 10,000 messages (1M messages in 100 sessions) held ~350 MB.
// A session larger than the whole bound is never hot: the scan answers it.
// chromem-go's sums are float32, one product at a
// time, in order: the flat scan adds the same way when it answers these
// queries (scan's inOrder), so a session's results are the same, to the
// bit, whether it is hot or not.

// DefaultHotBytes bounds the memory of the hot sessions' chromem-go
// collections: at 100 dimensions ~110,000 rows, all of 100k messages over
// 100 sessions, and a tenth of 1M.
const DefaultHotBytes = 64 << 20

// hotRowOverhead is what chromem-go spends on a document beside its
// float32s: the Document, its id string and its entry in the collection's
// map (estimated from the types, not measured).
const hotRowOverhead = 160

type hotSessions struct {
	mu  sync.Mutex
	max int64 // bytes
	db  *chromem.DB
	lru *list.List // of *collection, most recently searched first
}

func newHotSessions(maxBytes int64) *hotSessions {
	return &hotSessions{max: maxBytes, db: chromem.NewDB(), lru: list.New()}
}

// hotBytes is what c's chromem-go collection holds, or would.
func hotBytes(c *collection) int64 {
	return c.rows.Load() * int64(c.dim*4+hotRowOverhead)
}

// fits says whether c may be hot at all.
func (h *hotSessions) fits(c *collection) bool { return hotBytes(c) <= h.max }

// bytes is what the hot sessions hold now.
func (h *hotSessions) bytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytesLocked()
}

func (h *hotSessions) bytesLocked() int64 {
	var n int64
	for e := h.lru.Front(); e != nil; e = e.Next() {
		n += hotBytes(e.Value.(*collection))
	}
	return n
}

// noEmbed refuses to embed: vectors come from the store. A nil
// EmbeddingFunc would make chromem-go call OpenAI.
func noEmbed(context.Context, string) ([]float32, error) {
	return nil, fmt.Errorf("index: vectors come from the store, not from chromem-go")
}

// chromemName is a collection's name in the chromem DB; \x1f cannot occur
// in a tenant name.
func chromemName(k collKey) string { return k.tenant + "\x1f" + k.session }

// query answers the n rows of c most similar to qv (normalised) from c's
// chromem-go collection, building it if c is not hot, and keeps c hot.
func (h *hotSessions) query(ctx context.Context, c *collection, k collKey, qv []float32, n int) ([]vectorCandidate, error) {
	c.mu.RLock()
	cc := c.cc
	c.mu.RUnlock()
	if cc == nil && !h.fits(c) {
		return nil, errNotHot
	}
	if cc == nil {
		var err error
		if cc, err = h.build(c, k); err != nil {
			return nil, err
		}
	}
	h.touch(c, k)
	c.mu.RLock()
	defer c.mu.RUnlock()
	total := cc.Count()
	if total == 0 || c.cc != cc {
		// Evicted meanwhile, or empty: the scan answers the same.
		return nil, errNotHot
	}
	res, err := cc.QueryEmbedding(ctx, qv, min(n, total), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("chromem-go query, session %s: %w", k.session, err)
	}
	out := make([]vectorCandidate, 0, len(res))
	for _, r := range res {
		if _, ok := c.row[r.ID]; ok {
			out = append(out, vectorCandidate{id: r.ID, session: k.session, score: float64(r.Similarity)})
		}
	}
	return out, nil
}

// errNotHot sends a query back to the scan.
var errNotHot = fmt.Errorf("index: session is not hot")

// build makes c's chromem-go collection from its rows, the exact
// normalised vectors the scan scores.
func (h *hotSessions) build(c *collection, k collKey) (*chromem.Collection, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cc != nil {
		return c.cc, nil
	}
	h.mu.Lock()
	cc, err := h.db.GetOrCreateCollection(chromemName(k), nil, noEmbed)
	h.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("chromem-go collection of session %s: %w", k.session, err)
	}
	buf := make([]float32, c.dim)
	for i, id := range c.ids {
		if err := addRow(cc, id, c.exact(i, buf)); err != nil {
			return nil, err
		}
	}
	c.cc = cc
	return cc, nil
}

// addRow gives cc a copy of a row (chromem-go keeps the slice it is given).
func addRow(cc *chromem.Collection, id string, row []float32) error {
	if err := cc.AddDocument(context.Background(), chromem.Document{ID: id, Embedding: slices.Clone(row)}); err != nil {
		return fmt.Errorf("chromem-go add %s: %w", id, err)
	}
	return nil
}

// touch makes c the most recently searched hot session, and lets the
// least recently searched go while the hot sessions hold more than the
// bound (c too, when it alone does: a session's writes while hot count).
func (h *hotSessions) touch(c *collection, k collKey) {
	h.mu.Lock()
	if c.hot != nil {
		h.lru.MoveToFront(c.hot)
	} else {
		c.hot = h.lru.PushFront(c)
		c.key = k
	}
	var cold []*collection
	for total := h.bytesLocked(); total > h.max && h.lru.Len() > 0; {
		e := h.lru.Back()
		h.lru.Remove(e)
		victim := e.Value.(*collection)
		total -= hotBytes(victim)
		victim.hot = nil
		cold = append(cold, victim)
	}
	h.mu.Unlock()
	for _, victim := range cold {
		h.forget(victim)
	}
}

// forget drops c's chromem-go collection: c is no longer hot, or is gone.
func (h *hotSessions) forget(c *collection) {
	c.mu.Lock()
	had := c.cc != nil
	c.cc = nil
	c.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.hot != nil {
		h.lru.Remove(c.hot)
		c.hot = nil
	}
	if had {
		_ = h.db.DeleteCollection(chromemName(c.key)) // in memory: fails only on disk I/O
	}
}

// len is how many sessions are hot.
func (h *hotSessions) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lru.Len()
}
