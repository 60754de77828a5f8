package index

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ctxd/ctxd/internal/simd"
	"github.com/ctxd/ctxd/memory"
	"github.com/philippgille/chromem-go"
)

// The vector side is in memory, rebuilt from the store at start
// (LoadVectors): each tenant+session's vectors sit in contiguous
// per-session arrays that a flat, exact scan reads, for a search in one
// session, across sessions, and filtered (context building searches a
// session's cold originals). Hybrid search needs the vector side for every
// query, and the goal is p99 <= 25 ms at 100k documents over 100 sessions
// on 2 cores. Vector search alone, 100-d, top 50, 100k documents over 100
// sessions, all sessions (BenchmarkVectorParallelism; the machine was
// shared, so the p99s are loose):
//
//	chromem-go, collections one after another:  p50 77 ms, p99 133 ms, 3.4 MB/op
//	chromem-go, 4 collections at a time:        p50 54 ms, p99 128 ms
//	flat scan, one after another:               p50 7.0 ms, p99 9.4 ms, 20 kB/op
//	flat scan, 2 at a time:                     p50 3.7 ms, p99 8.3 ms
//
// In scalar Go the dot product cost ~0.6 ns a dimension (6.9 ms CPU per
// 100k-row query). In AVX2+FMA assembly (internal/simd) it waits on memory
// instead. Reading int8 rows (quant.go: a quarter of float32's bytes) and
// rescoring exactly the ~1% of rows that could enter the top n gives the
// exact result for ~1.5 ms CPU (BenchmarkSearch/100k/cross/vector: 6.9 ->
// 1.8-2.0 cpu-ms/op).
//
// Memory: a row holds only its int8 codes and scales. The stores keep
// vectors as int8 codes with a scale (boltstore's version 4 records), so
// the float32 vector a message arrives with is code*scale exactly: those
// codes are the row's, and the exact float32 row is rebuilt from them for
// the few rows a query rescores, bit for bit the vector the message had. A
// vector that is not such a product (another store's float32) keeps its
// float32 row beside. At 1M 100-d messages that is ~250 B a row where a
// float32 row, its int8 copy and chromem-go's copy of each document were
// ~1.5 kB: chromem-go now holds only the sessions searched most recently
// (hot.go), not every session.

// collKey names a collection: one per tenant and session, so that a
// single-session search scans only that session.
type collKey struct{ tenant, session string }

// collection holds one session's vectors in rows: ids[i],
// codes[i*dim:][:dim] (int8, see quant.go) with scales[i] (the scan's scale
// of the normalised row) and l1s[i], src[i] (the scale that rebuilds the
// message's vector from the codes; negative: the row's float32 is in
// floats), states[i], times[i] and sums[i] (a summary) describe the same
// message.
type collection struct {
	mu     sync.RWMutex
	dim    int
	ids    []string
	codes  []int8
	scales []float32
	l1s    []float32
	src    []float32
	invs   []float32            // normalize's factor of the rebuilt row (src >= 0), kept so that a rescore does not sum the row again
	floats map[string][]float32 // normalised rows of vectors that are not int8 codes times a scale
	states []memory.State
	times  []int64 // created_at, Unix nanoseconds
	sums   []bool  // a summary
	row    map[string]int
	tmp    []float32 // put's scratch, under mu

	// cc answers one-session queries while the session is hot (hot.go);
	// nil otherwise. Under mu.
	cc *chromem.Collection
	// hot is c's place in the hot sessions' order, key its name there;
	// both under hotSessions.mu.
	hot *list.Element
	key collKey
}

// hotPut gives c's chromem-go collection, when c is hot, row i as the scan
// scores it. c.mu must be held.
func (c *collection) hotPut(i int) {
	if c.cc == nil {
		return
	}
	if err := addRow(c.cc, c.ids[i], c.exact(i, make([]float32, c.dim))); err != nil {
		panic(err) // only for an empty id or vector, both excluded before a row is made
	}
}

func (c *collection) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.ids)
}

// put inserts or replaces a row; vec nil keeps the row's vector (a state
// change) and does nothing for an unknown id. c.mu must be held.
func (c *collection) put(m *memory.Message, vec []float32) {
	i, ok := c.row[m.ID]
	switch {
	case ok:
	case vec == nil:
		return
	default:
		i = len(c.ids)
		c.row[m.ID] = i
		c.ids = append(c.ids, m.ID)
		c.codes = append(c.codes, make([]int8, c.dim)...)
		c.scales = append(c.scales, 0)
		c.l1s = append(c.l1s, 0)
		c.src = append(c.src, 0)
		c.invs = append(c.invs, 0)
		c.states = append(c.states, "")
		c.times = append(c.times, 0)
		c.sums = append(c.sums, false)
	}
	c.states[i] = canonicalState(m.State)
	c.times[i] = unixNano(m.CreatedAt)
	c.sums[i] = m.IsSummary()
	if vec == nil {
		return
	}
	codes := c.codes[i*c.dim : (i+1)*c.dim]
	delete(c.floats, m.ID)
	if s, ok := int8Codes(vec, codes); ok && int8Rows {
		// The scan's scale is the normalised row's: normalize multiplies
		// every element by one factor, so the codes stay the row's (each
		// element off by float32 rounding, far inside quantSlack).
		if len(c.tmp) < c.dim {
			c.tmp = make([]float32, c.dim)
		}
		row := c.tmp[:c.dim]
		nf := normFactor(vec)
		c.src[i], c.invs[i] = s, float32(nf)
		c.rebuild(i, row)
		c.scales[i], c.l1s[i] = float32(float64(s)*nf), l1(row)
		c.hotPut(i)
		return
	}
	row := slices.Clone(vec)
	normalize(row)
	if c.floats == nil {
		c.floats = map[string][]float32{}
	}
	c.floats[m.ID] = row
	c.src[i] = -1
	c.scales[i], c.l1s[i] = quantizeRow(row, codes)
	c.hotPut(i)
}

// int8Rows off keeps every row as float32 (a test's reference).
var int8Rows = true

// rebuild writes into row the normalised vector of row i's codes: the
// float32 vector the message came with (code*scale, as the store decodes
// it), normalised as every row is, with normalize's arithmetic (each
// element times its factor, invs[i], which is normFactor's). Summing the
// row again for its norm was most of a rescore.
func (c *collection) rebuild(i int, row []float32) {
	s, inv := c.src[i], c.invs[i]
	for k, x := range c.codes[i*c.dim : (i+1)*c.dim] {
		row[k] = float32(float32(x)*s) * inv
	}
}

// exact returns row i's normalised float32 vector, in buf when it is
// rebuilt from its codes. c.mu must be held.
func (c *collection) exact(i int, buf []float32) []float32 {
	if c.src[i] >= 0 {
		c.rebuild(i, buf)
		return buf
	}
	return c.floats[c.ids[i]]
}

// remove deletes a row by moving the last row into its place. c.mu must be
// held.
func (c *collection) remove(id string) {
	i, ok := c.row[id]
	if !ok {
		return
	}
	if c.cc != nil {
		if err := c.cc.Delete(context.Background(), nil, nil, id); err != nil {
			panic(fmt.Sprintf("chromem-go delete %s: %v", id, err)) // in memory: fails only for no id
		}
	}
	last := len(c.ids) - 1
	if i != last {
		c.ids[i] = c.ids[last]
		c.states[i] = c.states[last]
		c.times[i] = c.times[last]
		c.sums[i] = c.sums[last]
		copy(c.codes[i*c.dim:(i+1)*c.dim], c.codes[last*c.dim:])
		c.scales[i], c.l1s[i], c.src[i], c.invs[i] = c.scales[last], c.l1s[last], c.src[last], c.invs[last]
		c.row[c.ids[i]] = i
	}
	delete(c.row, id)
	delete(c.floats, id)
	c.ids[last] = "" // let the string go
	c.ids, c.states, c.times, c.sums = c.ids[:last], c.states[:last], c.times[:last], c.sums[:last]
	c.scales, c.l1s, c.src, c.invs = c.scales[:last], c.l1s[:last], c.src[:last], c.invs[:last]
	c.codes = c.codes[:last*c.dim]
}

// vectors is the vector side: every tenant's sessions' collections.
type vectors struct {
	mu       sync.RWMutex
	byTenant map[string]map[string]*collection // tenant -> session -> collection
	dim      int                               // length of every vector; 0 until the first
	hot      *hotSessions                      // under mu (replaced by reset)
}

func newVectors() *vectors {
	return &vectors{byTenant: map[string]map[string]*collection{}, hot: newHotSessions(defaultHotSessions)}
}

// get returns the collection of k, creating it if create is set.
func (v *vectors) get(k collKey, create bool) *collection {
	v.mu.RLock()
	c := v.byTenant[k.tenant][k.session]
	v.mu.RUnlock()
	if c != nil || !create {
		return c
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if c = v.byTenant[k.tenant][k.session]; c != nil {
		return c
	}
	c = &collection{dim: v.dim, row: map[string]int{}}
	if v.byTenant[k.tenant] == nil {
		v.byTenant[k.tenant] = map[string]*collection{}
	}
	v.byTenant[k.tenant][k.session] = c
	return c
}

// checkDims refuses vectors whose length differs from the others' (or from
// each other's), and fixes the dimension on the first vector.
func (v *vectors) checkDims(msgs []*memory.Message) error {
	v.mu.RLock()
	dim := v.dim
	v.mu.RUnlock()
	for _, m := range msgs {
		if len(m.Vector) == 0 {
			continue
		}
		if dim == 0 {
			dim = len(m.Vector)
		}
		if len(m.Vector) != dim {
			return fmt.Errorf("message %s: vector has %d dimensions, the index holds %d", m.ID, len(m.Vector), dim)
		}
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dim == 0 {
		v.dim = dim
	} else if dim != v.dim {
		return fmt.Errorf("vectors have %d dimensions, the index holds %d", dim, v.dim)
	}
	return nil
}

// upsert writes msgs into their collections. A message without a vector keeps
// the one it had, with its new state, so state filters stay right.
func (v *vectors) upsert(msgs []*memory.Message) error {
	if err := v.checkDims(msgs); err != nil {
		return err
	}
	for k, ms := range groupBySession(msgs) {
		hasVector := slices.ContainsFunc(ms, func(m *memory.Message) bool { return len(m.Vector) > 0 })
		c := v.get(k, hasVector)
		if c == nil {
			continue
		}
		c.mu.Lock()
		for _, m := range ms {
			c.put(m, m.Vector)
		}
		c.mu.Unlock()
	}
	return nil
}

func (v *vectors) delete(msgs []*memory.Message) {
	for k, ms := range groupBySession(msgs) {
		c := v.get(k, false)
		if c == nil {
			continue
		}
		c.mu.Lock()
		for _, m := range ms {
			c.remove(m.ID)
		}
		c.mu.Unlock()
	}
}

func groupBySession(msgs []*memory.Message) map[collKey][]*memory.Message {
	groups := map[collKey][]*memory.Message{}
	for _, m := range msgs {
		k := collKey{m.Tenant, m.SessionID}
		groups[k] = append(groups[k], m)
	}
	return groups
}

func (v *vectors) reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.byTenant = map[string]map[string]*collection{}
	v.dim = 0
	v.hot = newHotSessions(v.hot.max)
}

func (v *vectors) dropSession(k collKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	sessions := v.byTenant[k.tenant]
	if c := sessions[k.session]; c != nil {
		v.hot.forget(c)
	}
	delete(sessions, k.session)
	if len(sessions) == 0 {
		delete(v.byTenant, k.tenant)
	}
}

func (v *vectors) count() uint64 {
	v.mu.RLock()
	defer v.mu.RUnlock()
	var n uint64
	for _, sessions := range v.byTenant {
		for _, c := range sessions {
			n += uint64(c.len())
		}
	}
	return n
}

// normalize scales vec to unit length in place: with unit vectors the dot
// product is the cosine.
func normalize(vec []float32) {
	var sum float64
	for _, x := range vec {
		sum += float64(x) * float64(x)
	}
	if sum == 0 || math.Abs(sum-1) < 1e-9 {
		return
	}
	inv := float32(1 / math.Sqrt(sum))
	for i := range vec {
		vec[i] *= inv
	}
}

// vectorCandidate is one hit of the vector side.
type vectorCandidate struct {
	id, session string
	score       float64 // cosine similarity
}

// collections returns the collections a query covers, with their session ids.
func (v *vectors) collections(tenant string, sessions []string) ([]*collection, []string) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	all := v.byTenant[tenant]
	var cs []*collection
	var ids []string
	if len(sessions) == 0 {
		for id, c := range all {
			cs, ids = append(cs, c), append(ids, id)
		}
		return cs, ids
	}
	for _, id := range sessions {
		if c := all[id]; c != nil && !slices.Contains(ids, id) {
			cs, ids = append(cs, c), append(ids, id)
		}
	}
	return cs, ids
}

// search returns the n most similar documents of q's tenant and sessions that
// pass q's filters (states, times, ids, summaries), best first. It scans up to parallel
// collections at a time.
func (v *vectors) search(ctx context.Context, q *memory.SearchQuery, n int, parallel int) ([]vectorCandidate, error) {
	v.mu.RLock()
	dim, hot := v.dim, v.hot
	v.mu.RUnlock()
	if dim == 0 {
		return nil, nil
	}
	if len(q.Vector) != dim {
		return nil, memory.Errorf(memory.EINVALID, "query vector has %d dimensions, the index holds %d", len(q.Vector), dim)
	}
	qv := slices.Clone(q.Vector)
	normalize(qv)
	f := newVectorFilter(q)
	cs, sessions := v.collections(q.Tenant, q.Sessions)
	// One session, no filter: chromem-go answered these before the index
	// kept int8 rows, and its sums (one float32 at a time, in order) are
	// kept, so that fused rankings stay as they were to the last bit.
	inOrder := len(cs) == 1 && f == nil
	if inOrder {
		out, err := hot.query(ctx, cs[0], collKey{q.Tenant, sessions[0]}, qv, n)
		if err != errNotHot {
			slices.SortFunc(out, byScoreThenID)
			return out[:min(n, len(out))], err
		}
	}

	// Each worker keeps its own best n across the collections it scans; the
	// workers' bests are merged at the end. Per-collection result lists cost
	// more: at 10k docs over 100 sessions, sorting their 5,000 candidates took
	// longer than the dot products.
	workers := max(1, min(parallel, len(cs)))
	tops := make([]minHeap, workers)
	var next atomic.Int64
	var qq *quantQuery
	if simd.Enabled {
		// In Go, int8 rows cost as much as float32 ones: the saving is the
		// assembly's, on memory bandwidth.
		qq = quantizeQuery(qv)
	}
	work := func(w int) {
		tops[w] = make(minHeap, 0, n)
		buf := scanBufs.Get().(*scanBuf)
		defer scanBufs.Put(buf)
		for {
			j := int(next.Add(1) - 1)
			if j >= len(cs) || ctx.Err() != nil {
				return
			}
			cs[j].scan(qv, qq, f, sessions[j], &tops[w], n, buf, inOrder)
		}
	}
	if workers == 1 {
		work(0)
	} else {
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() { work(w) })
		}
		wg.Wait()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []vectorCandidate
	for _, t := range tops {
		out = append(out, t...)
	}
	slices.SortFunc(out, byScoreThenID)
	return out[:min(n, len(out))], nil
}

// byScoreThenID orders candidates best first, ties by id.
func byScoreThenID(a, b vectorCandidate) int {
	if a.score != b.score {
		return cmp.Compare(b.score, a.score)
	}
	return strings.Compare(a.id, b.id)
}

// scanBuf is a scan worker's scratch space, grown as needed.
type scanBuf struct {
	acc      []int32
	row      []float32 // a row rebuilt from its codes
	rescored int       // rows scored exactly after the int8 pass (tests read it)
}

// scanBufs holds the scratch space of scan workers, so that a search does
// not allocate a session's worth of scores per collection.
var scanBufs = sync.Pool{New: func() any { return new(scanBuf) }}

// offer puts a row with score s into h, which keeps the n best: the worst of
// them leaves when s beats it. A tie keeps the row already there.
func (h *minHeap) offer(id, session string, s float64, n int) {
	switch {
	case len(*h) < n:
		h.push(vectorCandidate{id: id, session: session, score: s})
	case s > (*h)[0].score:
		(*h)[0] = vectorCandidate{id: id, session: session, score: s}
		h.down(0)
	}
}

// scan offers the rows that pass f to h, which keeps the n most similar to
// qv. With qq (the quantised qv) it reads the int8 rows and scores exactly
// only the rows that could enter h (see quant.go); without, it scores every
// row exactly. Both give the same h.
func (c *collection) scan(qv []float32, qq *quantQuery, f *vectorFilter, session string, h *minHeap, n int, buf *scanBuf, inOrder bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rows := len(c.ids)
	if cap(buf.row) < c.dim {
		buf.row = make([]float32, c.dim)
	}
	var exact [1]float32
	if qq == nil {
		for i := range rows {
			if f == nil || f.keep(c.ids[i], c.states[i], c.times[i], c.sums[i]) {
				c.dot(qv, c.exact(i, buf.row[:c.dim]), exact[:], inOrder)
				h.offer(c.ids[i], session, float64(exact[0]), n)
			}
		}
		return
	}
	if cap(buf.acc) < rows {
		buf.acc = make([]int32, rows)
	}
	acc := buf.acc[:rows]
	simd.DotRowsInt8(qq.codes, c.codes, acc)
	for i, a := range acc {
		if len(*h) == n {
			approx, bound := qq.approx(a, c.scales[i], c.l1s[i], c.src[i] >= 0)
			if approx+bound <= (*h)[0].score {
				continue // cannot beat the worst kept
			}
		}
		if f != nil && !f.keep(c.ids[i], c.states[i], c.times[i], c.sums[i]) {
			continue
		}
		c.dot(qv, c.exact(i, buf.row[:c.dim]), exact[:], inOrder)
		h.offer(c.ids[i], session, float64(exact[0]), n)
		buf.rescored++
	}
}

// dot writes into out[0] the dot product of qv and row: added in order
// with inOrder (see search), else as simd adds.
func (c *collection) dot(qv, row, out []float32, inOrder bool) {
	if !inOrder {
		simd.DotRows(qv, row, out)
		return
	}
	var s float32
	for i := range qv {
		s += qv[i] * row[i]
	}
	out[0] = s
}

// minHeap keeps the best n rows seen, the worst of them on top. Hand-written
// rather than container/heap, which boxes every pushed value.
type minHeap []vectorCandidate

func (h *minHeap) push(e vectorCandidate) {
	*h = append(*h, e)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if s[p].score <= s[i].score {
			break
		}
		s[p], s[i] = s[i], s[p]
		i = p
	}
}

func (h minHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h[r].score < h[l].score {
			m = r
		}
		if h[i].score <= h[m].score {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// vectorFilter is a query's filter on states, times, ids and summaries.
type vectorFilter struct {
	states       []memory.State
	since, until int64
	ids          map[string]bool // nil: any
	noSummaries  bool
}

// newVectorFilter returns nil when q filters nothing.
func newVectorFilter(q *memory.SearchQuery) *vectorFilter {
	if len(q.States) == 0 && q.Since.IsZero() && q.Until.IsZero() && len(q.IDs) == 0 && !q.NoSummaries {
		return nil
	}
	f := &vectorFilter{since: math.MinInt64, until: math.MaxInt64, noSummaries: q.NoSummaries}
	for _, st := range q.States {
		f.states = append(f.states, canonicalState(st))
	}
	if len(q.IDs) > 0 {
		f.ids = make(map[string]bool, len(q.IDs))
		for _, id := range q.IDs {
			f.ids[id] = true
		}
	}
	if !q.Since.IsZero() {
		f.since = unixNano(q.Since)
	}
	if !q.Until.IsZero() {
		f.until = unixNano(q.Until)
	}
	return f
}

func (f *vectorFilter) keep(id string, s memory.State, t int64, summary bool) bool {
	return t >= f.since && t <= f.until && (len(f.states) == 0 || slices.Contains(f.states, s)) &&
		(f.ids == nil || f.ids[id]) && !(f.noSummaries && summary)
}

// canonicalState returns memory's constant for a known state. Rows and
// filters hold those, so a filter compares a row's state by its pointer
// rather than reading each row's own copy, decoded with its message and
// scattered over the heap (the state check was 4% of a context call's CPU
// on 10k cold messages, in a scan that touches every row).
func canonicalState(s memory.State) memory.State {
	for _, c := range memory.States {
		if c == s {
			return c
		}
	}
	return s
}

// unixNano is t.UnixNano clamped to int64: UnixNano is undefined before 1678
// and after 2262 (the zero time among them).
func unixNano(t time.Time) int64 {
	switch {
	case t.Before(minNano):
		return math.MinInt64
	case t.After(maxNano):
		return math.MaxInt64
	}
	return t.UnixNano()
}

var minNano, maxNano = time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
