// Package index is ctxd's searchable copy of the store: full text in Bleve (on
// disk, BM25) and vectors in memory (an exact scan, rebuilt from the store at
// start), fused into one ranking. It implements memory.Index.
package index

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/index/scorch"
	"github.com/blevesearch/bleve/v2/search/highlight"
	"github.com/blevesearch/bleve/v2/search/highlight/format/plain"
	"github.com/blevesearch/bleve/v2/search/highlight/fragmenter/simple"
	simplehl "github.com/blevesearch/bleve/v2/search/highlight/highlighter/simple"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/ctxd/ctxd/memory"
)

// Defaults of Options.
const (
	DefaultFusion = FusionMinMax
	// DefaultVectorWeight: LoCoMo dev, R@10 overall with the embedded GloVe
	// model (TestLoCoMoHybrid): text alone 64.9, vector alone 41.1; min-max
	// fusion w=0.2 64.6, 0.3 63.9, 0.4 63.2, 0.5 58.3 (0.3 with 1,000
	// candidates: 65.2); RRF k=10 63.0, k=60 53.9. GloVe adds nothing overall
	// to this text side (its speaker-name clause is worth +8.6), but multi-hop
	// rises from 32 to 41 at w=0.3 while single-hop falls from 67 to 61. Above
	// 0.4 it hurts. A stronger embedder deserves more weight: measure.
	DefaultVectorWeight    = 0.3
	DefaultRRFK            = 60
	DefaultMinCandidates   = 50
	DefaultCandidateFactor = 3
	// The boosts of the name and date clauses against the text clause (1).
	// LoCoMo dev, text only, R@10 overall (n=231; the dev set's BM25
	// floor is 57.3), from TestLoCoMo:
	//   text alone 56.1; + name (boost 1) 64.7; + when alone 57.0;
	//   name 1 + when 1: 64.9; name 0.5 + when 0.5: 64.4; name 1.5 + when 1: 65.7.
	// The name (speaker) is what pays; the date words are within noise here
	// (few questions name a date) but never hurt. Bleve's BM25 b (0.75, a
	// process-wide variable) at 0, 0.3 or 0.5 moved R@10 by under 1.5 points
	// with the name clause, so it is left alone.
	DefaultNameBoost = 1.0
	DefaultWhenBoost = 1.0
	// DefaultPartBoost weighs the clause of the parts of a query's code
	// names (see codeTokenizer).
	DefaultPartBoost = 0.5
	// DefaultVectorParallelism is how many sessions a vector search scans at
	// once; 0 means GOMAXPROCS. On 2 cores, 2 halved the scan's wall time and
	// 4 did no better (see vector.go).
	DefaultVectorParallelism = 0
	DefaultK                 = 10
	MaxK                     = 1000
)

// Options tune an Index. Zero values mean the defaults.
type Options struct {
	Fusion       string  // FusionMinMax or FusionRRF
	VectorWeight float64 // weight of the vector side in min-max fusion, in (0,1]
	RRFK         int     // k of reciprocal rank fusion

	// Each side contributes max(CandidateFactor*K, MinCandidates) candidates
	// to fusion, unless the query sets SearchQuery.Candidates.
	MinCandidates   int
	CandidateFactor int

	// Boosts of the author's name and the date words against the message
	// text (1). Negative leaves the field out of the query.
	NameBoost float64
	WhenBoost float64
	// PartBoost is the boost of the clause of the parts of the query's code
	// names ("conn", "reset" of "ERR_CONN_RESET"). Negative leaves it out.
	PartBoost float64
	// FeedbackWeight is the boost of the clause of SearchQuery.Feedback's
	// distinctive terms (see feedback.go). Negative leaves it out.
	FeedbackWeight float64

	// Location is the time zone of the date words ("7 May 2023 Sunday
	// afternoon"). Default UTC, so a rebuild always writes the same words.
	Location *time.Location

	VectorParallelism int // sessions a vector search scans at once

	// Texts gives the text of the hits a search highlights: the index does
	// not keep it. Nil: hits come without highlights.
	Texts TextSource

	// Expander, with ExpansionWeight > 0, adds the neighbours of the query's
	// words to the text clause at that boost (the query's own words: 1).
	// Hybrid mode only: text mode stays the literal match. Off unless set;
	// ctxd serves with DefaultExpansionWeight (expand.go).
	Expander        Expander
	ExpansionWeight float64

	// ReadOnly opens an existing index without writing to it (no segment
	// merges, no persister, a shared lock): `ctxd verify` without --repair
	// only reads. A missing or empty dir is ErrMissing, not a new index.
	ReadOnly bool
}

// ErrMissing marks an index dir that does not exist or is empty, opened
// ReadOnly (anything else would create it).
var ErrMissing = errors.New("no index")

// TextSource reads messages by id, as memory.Store does (the store is
// what serve passes).
type TextSource interface {
	MessagesByID(ctx context.Context, tenant string, ids []string, withVectors bool) ([]*memory.Message, error)
}

func (o Options) withDefaults() (Options, error) {
	if o.Fusion == "" {
		o.Fusion = DefaultFusion
	}
	if o.Fusion != FusionMinMax && o.Fusion != FusionRRF {
		return o, fmt.Errorf("index options: fusion %q is not %q or %q", o.Fusion, FusionMinMax, FusionRRF)
	}
	if o.VectorWeight == 0 {
		o.VectorWeight = DefaultVectorWeight
	}
	if o.VectorWeight < 0 || o.VectorWeight > 1 {
		return o, fmt.Errorf("index options: vector weight %v is outside (0,1]", o.VectorWeight)
	}
	setDefault(&o.RRFK, DefaultRRFK)
	setDefault(&o.MinCandidates, DefaultMinCandidates)
	setDefault(&o.CandidateFactor, DefaultCandidateFactor)
	if o.VectorParallelism <= 0 {
		o.VectorParallelism = runtime.GOMAXPROCS(0)
	}
	if o.NameBoost == 0 {
		o.NameBoost = DefaultNameBoost
	}
	if o.WhenBoost == 0 {
		o.WhenBoost = DefaultWhenBoost
	}
	if o.PartBoost == 0 {
		o.PartBoost = DefaultPartBoost
	}
	if o.FeedbackWeight == 0 {
		o.FeedbackWeight = DefaultFeedbackWeight
	}
	if math.IsNaN(o.ExpansionWeight) || o.ExpansionWeight < 0 {
		return o, fmt.Errorf("index options: expansion weight %v is not a number >= 0", o.ExpansionWeight)
	}
	if o.Location == nil {
		o.Location = time.UTC
	}
	return o, nil
}

func setDefault(v *int, def int) {
	if *v <= 0 {
		*v = def
	}
}

// ErrCorrupt marks an index directory that cannot be used as it is: damaged,
// not an index, or written by an incompatible version. The index is derived
// data: Remove it and rebuild from the store.
var ErrCorrupt = errors.New("index is corrupt or incompatible")

// ErrSchema marks an index written by a version of ctxd with another
// mapping (schemaVersion): nothing is wrong with it, but it must be rebuilt.
// It is an ErrCorrupt too.
var ErrSchema = fmt.Errorf("%w: written with another schema", ErrCorrupt)

// ErrNoAccess marks an index ctxd may not read or write (permissions, a
// read-only file system): nothing is wrong with it, and moving it aside to
// rebuild would fail the same way, or throw a good index away.
var ErrNoAccess = memory.ErrIndexNoAccess

// ErrInUse marks an index another process holds open (a running server).
var ErrInUse = errors.New("in use by another process")

// Internal keys Bleve stores with the documents.
var (
	watermarkKey = []byte("ctxd.watermark")
	schemaKey    = []byte("ctxd.schema")
)

// lockTimeout bounds the wait for an index another process holds: bbolt's
// default is to wait forever.
var lockTimeout = 2 * time.Second

// schemaVersion changes whenever the mapping or the document shape does.
// An index of another version is rebuilt from the store at start-up.
// 2: the text field has no term vectors.
// 3: the text is not stored; id, role, important and tokens are not
// indexed; created_at has no doc values.
// 4: text, name and when are fields per tenant ("text@acme"), so BM25
// statistics do not cross tenants; no _all field.
// 5: tokens are cut to maxTokenRunes runes before they are stemmed.
// 6: code names are terms whole and by their parts (codeTokenizer).
// 7: a path's whole is its file's name; a path ending in a number has none.
const schemaVersion = "7"

// Index implements memory.Index. It is safe for concurrent use.
type Index struct {
	dir  string
	opts Options
	text bleve.Index
	vec  *vectors
	hl   highlight.Highlighter

	tenants atomic.Pointer[tenancy]

	// applyMu serialises Apply: a session delete lists the session's
	// documents and must not miss those a concurrent batch adds.
	applyMu sync.Mutex
	closed  atomic.Bool

	// writes counts the batches applied to the text side: what was read
	// from it between two of them stays true (see dfCache).
	writes  atomic.Uint64
	dfCache atomic.Pointer[dfCache]

	load vectorLoad // see vecload.go
}

var _ memory.Index = (*Index)(nil)

// Open opens the index in dir, or creates it if dir does not exist or is
// empty. The vector side starts empty: fill it with LoadVectors. An index that
// cannot be opened gives an error wrapping ErrCorrupt; one held by another
// process gives another error after 2 s (do not delete that one).
//
// Bleve skips a snapshot it cannot load and opens the previous one, logging
// "unable to load snapshot". Its watermark goes back with its documents, so
// the index is consistent but older: the caller must check that the store
// still has every change after Watermark (not trimmed), and rebuild if not.
func Open(dir string, opts Options) (*Index, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// unsafe_batch: a batch returns once it is searchable, not once the
	// persister has written it. The store is the truth and the watermark
	// travels in the same batch as its documents, so after a crash the index
	// reopens at the last batch on disk and the caller replays the rest. Each
	// batch waiting for its own segment file took most of ingest's time in
	// the index; the persister now writes what piled up as one segment.
	cfg := map[string]any{"bolt_timeout": lockTimeout.String(), "unsafe_batch": true}
	if opts.ReadOnly {
		cfg["read_only"] = true
	}
	var text bleve.Index
	if empty, err := isEmptyDir(dir); err != nil {
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	} else if empty && opts.ReadOnly {
		return nil, fmt.Errorf("open index %s: %w", dir, ErrMissing)
	} else if empty {
		m, err := newMapping()
		if err != nil {
			return nil, err
		}
		// Bleve refuses to create in an existing directory, even an empty one.
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
		text, err = bleve.NewUsing(dir, m, scorch.Name, scorch.Name, cfg)
		if err != nil {
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
		if err := text.SetInternal(schemaKey, []byte(schemaVersion)); err != nil {
			_ = text.Close()
			return nil, fmt.Errorf("create index %s: %w", dir, err)
		}
	} else {
		text, err = openExisting(dir, cfg)
		if err != nil {
			return nil, err
		}
	}
	x := &Index{
		dir:  dir,
		opts: opts,
		text: text,
		vec:  newVectors(),
		hl:   simplehl.NewHighlighter(simple.NewFragmenter(snippetRunes), plain.NewFragmentFormatter(markOpen, markClose), "…"),
	}
	if err := x.loadTenancy(); err != nil {
		_ = text.Close()
		return nil, fmt.Errorf("open index %s: %w", dir, err)
	}
	return x, nil
}

func openExisting(dir string, cfg map[string]any) (text bleve.Index, err error) {
	// A damaged segment can make Bleve panic rather than fail.
	defer func() {
		if r := recover(); r != nil {
			text, err = nil, fmt.Errorf("open index %s: %w: panic: %v", dir, ErrCorrupt, r)
		}
	}()
	text, err = bleve.OpenUsing(dir, cfg)
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("open index %s: %w: %w", dir, ErrInUse, err)
	}
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS) {
		return nil, fmt.Errorf("open index %s: %w: %w: give ctxd read and write access to it", dir, ErrNoAccess, err)
	}
	if err != nil {
		return nil, fmt.Errorf("open index %s: %w: %w", dir, ErrCorrupt, err)
	}
	v, err := text.GetInternal(schemaKey)
	if err != nil || string(v) != schemaVersion {
		_ = text.Close()
		if err == nil {
			return nil, fmt.Errorf("open index %s: %w (schema %q, want %q)", dir, ErrSchema, v, schemaVersion)
		}
		return nil, fmt.Errorf("open index %s: %w: %w", dir, ErrCorrupt, err)
	}
	return text, nil
}

// isEmptyDir reports whether dir is missing or an empty directory. Something
// else in its place (a regular file) is no index: ErrCorrupt, which verify
// reports as index_unusable and a rebuild moves aside, where reading it as
// a directory failed every caller outright.
func isEmptyDir(dir string) (bool, error) {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err == nil && !fi.IsDir() {
		return false, fmt.Errorf("%w: %s is not a directory", ErrCorrupt, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	return len(entries) == 0, nil
}

// Remove deletes the index in dir (closed first), so that Open builds a new one.
func Remove(dir string) error {
	if err := os.RemoveAll(filepath.Clean(dir)); err != nil {
		return fmt.Errorf("remove index %s: %w", dir, err)
	}
	return nil
}

// Close closes the text side; the vector side goes with the Index.
func (x *Index) Close() error {
	if x.closed.Swap(true) {
		return nil
	}
	var err error
	if !x.opts.ReadOnly { // nothing was written, and no persister runs
		x.applyMu.Lock()
		err = x.persist(closeFlushTimeout)
		x.applyMu.Unlock()
	}
	if err != nil {
		// Not fatal: what is not on disk is replayed from the store at the
		// next start.
		err = fmt.Errorf("close index %s: %w", x.dir, err)
	}
	if cerr := x.text.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("close index %s: %w", x.dir, cerr))
	}
	return err
}

// closeFlushTimeout bounds how long Close waits for the persister.
var closeFlushTimeout = 10 * time.Second

// persist waits until every batch applied so far is on disk: Bleve closes
// without writing what it holds in memory (see unsafe_batch in Open), and a
// clean shutdown should not leave a catch-up for the next start. Batches
// persist in order, so a last batch (the watermark again) that is on disk
// means all are. Call with applyMu held.
func (x *Index) persist(timeout time.Duration) error {
	wm, err := x.text.GetInternal(watermarkKey)
	if err != nil {
		return fmt.Errorf("read watermark: %w", err)
	}
	if len(wm) == 0 {
		return nil // nothing applied yet (a nil value would delete the key)
	}
	done := make(chan error, 1)
	batch := x.text.NewBatch()
	batch.SetInternal(watermarkKey, wm)
	batch.SetPersistedCallback(func(err error) { done <- err })
	if err := x.text.Batch(batch); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		return fmt.Errorf("flush: not on disk after %v", timeout)
	}
}

var errClosed = errors.New("index is closed")

// Apply writes b: session deletes first, then message deletes, then upserts,
// so an upsert wins over a delete of the same id in the batch. The text side
// and the watermark are one Bleve batch; the vector side follows. If Apply
// fails, apply the same batch again: every step is idempotent.
func (x *Index) Apply(ctx context.Context, b memory.IndexBatch) error {
	if x.closed.Load() {
		return errClosed
	}
	// Check vectors before the text side commits, so a bad batch changes
	// nothing.
	if err := x.vec.checkDims(b.Upserts); err != nil {
		return fmt.Errorf("apply to index %s: %w", x.dir, err)
	}
	x.applyMu.Lock()
	defer x.applyMu.Unlock()

	batch := x.text.NewBatch()
	for _, s := range b.DeleteSessions {
		ids, err := x.sessionDocIDs(ctx, s)
		if err != nil {
			return fmt.Errorf("apply to index %s: %w", x.dir, err)
		}
		for _, id := range ids {
			batch.Delete(id)
		}
	}
	for _, m := range b.Deletes {
		batch.Delete(m.ID)
	}
	for _, m := range b.Upserts {
		doc, err := x.textDocument(m)
		if err == nil {
			err = batch.IndexAdvanced(doc)
		}
		if err != nil {
			return fmt.Errorf("apply to index %s: message %s: %w", x.dir, m.ID, err)
		}
	}
	x.noteTenants(b.Upserts)
	x.load.note(b)
	var wm [8]byte
	binary.BigEndian.PutUint64(wm[:], b.Watermark)
	batch.SetInternal(watermarkKey, wm[:])
	err := x.text.Batch(batch)
	// Even a failed batch may have changed something: drop what was cached.
	x.writes.Add(1)
	if err != nil {
		return fmt.Errorf("apply to index %s: %w", x.dir, err)
	}

	for _, s := range b.DeleteSessions {
		x.vec.dropSession(collKey{s.Tenant, s.ID})
	}
	x.vec.delete(b.Deletes)
	if err := x.vec.upsert(b.Upserts); err != nil {
		return fmt.Errorf("apply to index %s: %w", x.dir, err)
	}
	return nil
}

// LoadVectors adds msgs to the vector side only. Call it at start-up with
// every vector of the store (Store.ForEachVector), in chunks of any size:
// before the first Apply, or between BeginVectorLoad and EndVectorLoad while
// Apply goes on (a message Apply wrote since BeginVectorLoad keeps what
// Apply wrote).
func (x *Index) LoadVectors(ctx context.Context, msgs []*memory.Message) error {
	if x.closed.Load() {
		return errClosed
	}
	x.applyMu.Lock()
	defer x.applyMu.Unlock()
	if err := x.vec.upsert(x.load.stale(msgs)); err != nil {
		return fmt.Errorf("load vectors into index %s: %w", x.dir, err)
	}
	return nil
}

// ResetVectors empties the vector side, for when the embedding model (and so
// the dimension) changes: LoadVectors the new vectors next.
func (x *Index) ResetVectors() {
	x.applyMu.Lock()
	defer x.applyMu.Unlock()
	x.vec.reset()
}

// Watermark is the Seq of the last change applied; 0 for a new index.
func (x *Index) Watermark() (uint64, error) {
	if x.closed.Load() {
		return 0, errClosed
	}
	v, err := x.text.GetInternal(watermarkKey)
	if err != nil {
		return 0, fmt.Errorf("read watermark of index %s: %w", x.dir, err)
	}
	if len(v) == 0 {
		return 0, nil
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("read watermark of index %s: %w: %d bytes", x.dir, ErrCorrupt, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// Count returns how many documents the text and vector sides hold.
func (x *Index) Count() (text, vector uint64, err error) {
	if x.closed.Load() {
		return 0, 0, errClosed
	}
	text, err = x.text.DocCount()
	if err != nil {
		return 0, 0, fmt.Errorf("count index %s: %w", x.dir, err)
	}
	return text, x.vec.count(), nil
}
