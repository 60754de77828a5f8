package memory

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// indexer keeps the Index in step with the Store by replaying the store's
// change log. The same path serves a normal write (replay up to the write's
// seq before answering), a crash between store commit and index write (replay
// from the index's watermark at start-up) and a lost index (replay everything).
type indexer struct {
	store Store
	index Index
	log   *slog.Logger

	mu        sync.Mutex    // one replay at a time; concurrent writers share it
	watermark atomic.Uint64 // last change the index holds
	lastErr   atomic.Pointer[error]

	// loader is the index, when its vectors load after open (see
	// loadInBackground); loadErr is why that load failed.
	loader  VectorLoader
	loadErr atomic.Pointer[error]

	// background: a new, empty index (or one whose build a stopped node
	// left unfinished) is built in the background while the node answers
	// (indexbuild.go); set for a shared store.
	background   bool
	building     atomic.Bool
	build        *buildState // guarded by mu; nil once built
	buildIndexed atomic.Int64
	buildTotal   atomic.Int64
	prio         priority // requests the build lets go first
}

// ChangeBatch is how many changes or messages one batch of index work
// (and of admin's pages) holds.
const ChangeBatch = 1000

// sync returns once the index holds every change up to seq.
func (ix *indexer) sync(ctx context.Context, seq uint64) error {
	if ix.watermark.Load() >= seq {
		return nil
	}
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.watermark.Load() >= seq {
		return nil // another writer's replay covered ours
	}
	return ix.replayLocked(ctx)
}

// syncSessions is sync for a read of the tenant's sessions ids: while the
// index is being built, those sessions are indexed first.
func (ix *indexer) syncSessions(ctx context.Context, seq uint64, tenant string, ids []string) error {
	if !ix.building.Load() {
		return ix.sync(ctx, seq)
	}
	ix.prio.enter()
	defer ix.prio.leave()
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if err := ix.buildSessions(ctx, tenant, ids); err != nil {
		return err
	}
	if ix.watermark.Load() >= seq {
		return nil
	}
	return ix.replayLocked(ctx)
}

// replayLocked is replay recording its error for Ready. Callers hold mu.
func (ix *indexer) replayLocked(ctx context.Context) error {
	err := ix.replay(ctx)
	if err != nil {
		ix.lastErr.Store(&err)
	} else {
		ix.lastErr.Store(nil)
	}
	return err
}

// replay applies every change after the watermark. Callers hold mu.
func (ix *indexer) replay(ctx context.Context) error {
	for {
		changes, err := ix.store.Changes(ctx, ix.watermark.Load(), ChangeBatch)
		if err != nil {
			return fmt.Errorf("read change log: %w", err)
		}
		if len(changes) == 0 {
			return nil
		}
		// A session deleted and re-created within one run of changes must be
		// deleted before its new messages are added: cut batches there.
		start := 0
		for i, c := range changes {
			if c.Op != ChangeDeleteSession {
				continue
			}
			if err := ix.applyChanges(ctx, changes[start:i]); err != nil {
				return err
			}
			b := IndexBatch{DeleteSessions: []SessionRef{{c.Tenant, c.SessionID}}, Watermark: ix.persistedWM(c.Seq)}
			if err := ix.index.Apply(ctx, b); err != nil {
				return fmt.Errorf("index delete session %s: %w", c.SessionID, err)
			}
			ix.watermark.Store(c.Seq)
			start = i + 1
		}
		if err := ix.applyChanges(ctx, changes[start:]); err != nil {
			return err
		}
	}
}

// applyChanges indexes the current store state of the messages the changes
// name: an id the store no longer has is deleted from the index.
func (ix *indexer) applyChanges(ctx context.Context, changes []Change) error {
	if len(changes) == 0 {
		return nil
	}
	byTenant := map[string][]string{}
	named := map[string]Change{}
	for _, c := range changes {
		if _, seen := named[c.MessageID]; !seen {
			byTenant[c.Tenant] = append(byTenant[c.Tenant], c.MessageID)
		}
		named[c.MessageID] = c
	}
	seq := changes[len(changes)-1].Seq
	b := IndexBatch{Watermark: ix.persistedWM(seq)}
	for tenant, ids := range byTenant {
		msgs, err := ix.store.MessagesByID(ctx, tenant, ids, true)
		if err != nil {
			return fmt.Errorf("read messages to index: %w", err)
		}
		found := make(map[string]bool, len(msgs))
		for _, m := range msgs {
			found[m.ID] = true
		}
		b.Upserts = append(b.Upserts, msgs...)
		for _, id := range ids {
			if !found[id] {
				c := named[id]
				b.Deletes = append(b.Deletes, &Message{ID: id, Tenant: c.Tenant, SessionID: c.SessionID})
			}
		}
	}
	if err := ix.index.Apply(ctx, b); err != nil {
		return fmt.Errorf("index %d changes: %w", len(changes), err)
	}
	ix.watermark.Store(seq)
	return nil
}

// open brings the index up to date with the store before the server
// answers, or, for a new index on a shared store, readies its build in the
// background (building: the caller runs it; see indexbuild.go). An index
// that is a VectorLoader gets its vectors afterwards, from
// loadInBackground: reading every vector before answering made start-up
// grow with the store (66 s at 1M messages).
func (ix *indexer) open(ctx context.Context) (building bool, err error) {
	start := time.Now()
	if vl, ok := ix.index.(VectorLoader); ok {
		vl.BeginVectorLoad()
		ix.loader = vl
	} else if err := ix.loadVectors(ctx); err != nil {
		return false, err
	}
	if ix.background {
		wm, err := ix.index.Watermark()
		if err != nil {
			return false, fmt.Errorf("read index watermark: %w", err)
		}
		last, err := ix.store.LastSeq(ctx)
		if err != nil {
			return false, fmt.Errorf("read store seq: %w", err)
		}
		if build, resumed, err := ix.toBuild(wm, last); err != nil || build {
			if err == nil {
				err = ix.startBuild(ctx, last, resumed)
			}
			return err == nil, err
		}
	}
	return false, ix.catchUp(ctx, start)
}

// loadInBackground loads the vectors open left to load, if any, and
// returns why they did not load.
func (ix *indexer) loadInBackground(ctx context.Context) error {
	if ix.loader == nil {
		return nil
	}
	start := time.Now()
	err := ix.loadVectors(ctx)
	if err != nil {
		ix.loadErr.Store(&err)
	}
	ix.loader.EndVectorLoad(err)
	if err != nil {
		if ctx.Err() == nil {
			ix.log.Error("vectors did not load: vector and hybrid search fail", "err", err)
		}
		return err
	}
	ix.log.Info("vectors loaded", "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// catchUp replays the changes the index lacks, rebuilding it from the store
// when the change log no longer reaches back to its watermark. The offline
// admin verbs share it: their vector side is not loaded (nothing searches it).
func (ix *indexer) catchUp(ctx context.Context, start time.Time) error {
	wm, err := ix.index.Watermark()
	if err != nil {
		return fmt.Errorf("read index watermark: %w", err)
	}
	last, err := ix.store.LastSeq(ctx)
	if err != nil {
		return fmt.Errorf("read store seq: %w", err)
	}
	if wm > last {
		return fmt.Errorf("index is ahead of the store (index at change %d, store at %d): it belongs to another store; remove the index dir to rebuild it", wm, last)
	}
	ix.watermark.Store(wm)
	why, err := ix.needsRebuild(ctx, wm, last)
	if err != nil {
		return err
	}
	if why != "" {
		ix.log.Warn("rebuilding the full-text index from the store", "reason", why,
			"index_watermark", wm, "store_seq", last)
		if err := ix.rebuild(ctx, last); err != nil {
			return err
		}
	}
	lag := last - ix.watermark.Load()
	ix.mu.Lock()
	err = ix.replay(ctx)
	ix.mu.Unlock()
	if err != nil {
		return err
	}
	ix.log.Info("index ready", "watermark", ix.watermark.Load(), "caught_up_changes", lag, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

func (ix *indexer) loadVectors(ctx context.Context) error {
	// A damaged vector record is said, not only skipped: its message is
	// then missing from vector search until verify --repair embeds it.
	damaged := func(d *DamagedRecord) {
		ix.log.Error("vector record damaged: skipped; its message is not found by vector search until `ctxd verify --repair` embeds it again",
			"message", d.MessageID, "err", d.Err)
	}
	n, err := inBatches(func(fn func(*Message) error) error { return ix.store.ForEachVector(ctx, fn, damaged) },
		func(batch []*Message) error { return ix.index.LoadVectors(ctx, batch) })
	if err != nil {
		return fmt.Errorf("load vectors: %w", err)
	}
	ix.log.Debug("vectors loaded", "count", n)
	return nil
}

// inBatches feeds what scan visits to apply, ChangeBatch at a time, and
// returns how many went through. Each call gets a fresh slice.
func inBatches(scan func(func(*Message) error) error, apply func([]*Message) error) (int, error) {
	var batch []*Message
	n := 0
	// The last call may be empty: a rebuild of an empty store still records
	// its watermark.
	flush := func() error {
		if err := apply(batch); err != nil {
			return err
		}
		n += len(batch)
		batch = make([]*Message, 0, ChangeBatch)
		return nil
	}
	err := scan(func(m *Message) error {
		batch = append(batch, m)
		if len(batch) == ChangeBatch {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	return n, err
}

// needsRebuild says why replaying the change log from the index's watermark
// wm cannot make the index whole ("" when it can). The log is trimmed once
// the index holds it, so a lost, new or rolled-back index whose watermark is
// behind the log's first entry, or behind a log trimmed to nothing, would
// replay only part of the store, or none of it, and stay so for good. An
// index that holds every change by its watermark but not one document per
// stored message (emptied, a rebuild cut short, documents lost while the
// watermark stayed) is caught by its count against the sessions' counts,
// which every write keeps (a list of the sessions, not a scan of the
// messages).
func (ix *indexer) needsRebuild(ctx context.Context, wm, last uint64) (string, error) {
	if wm < last {
		first, err := ix.store.Changes(ctx, wm, 1)
		if err != nil {
			return "", fmt.Errorf("read change log: %w", err)
		}
		if len(first) == 0 {
			return fmt.Sprintf("the index is at change %d, the store at %d, and the change log was trimmed", wm, last), nil
		}
		if first[0].Seq > wm+1 {
			return fmt.Sprintf("the index is at change %d and the change log starts at %d", wm, first[0].Seq), nil
		}
		return "", nil
	}
	docs, _, err := ix.index.Count()
	if err != nil {
		return "", fmt.Errorf("count index documents: %w", err)
	}
	stored, err := ix.storedMessages(ctx)
	if err != nil {
		return "", err
	}
	if docs != stored {
		return fmt.Sprintf("the index holds %d documents, the store %d messages", docs, stored), nil
	}
	return "", nil
}

// storedMessages is how many messages the store holds, by its sessions'
// counts.
func (ix *indexer) storedMessages(ctx context.Context) (uint64, error) {
	var n uint64
	err := VisitSessions(ctx, ix.store, func(s *Session) error {
		c := s.Counts
		n += uint64(c.Active + c.Summarized + c.Dropped + c.Recovered)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count stored messages: %w", err)
	}
	return n, nil
}

// rebuild indexes every stored message and records watermark upTo (read
// before the scan: later changes are replayed after it, idempotently).
// An index that was behind may hold documents of messages deleted since:
// the rebuild writes every stored message, then deletes the rest.
func (ix *indexer) rebuild(ctx context.Context, upTo uint64) error {
	if _, err := ix.rebuildWith(ctx, upTo, func(int) {}); err != nil {
		return err
	}
	docs, ok := ix.index.(DocLister)
	if !ok {
		return nil
	}
	var extra []*Message
	err := docs.ForEachDoc(ctx, func(d IndexDoc) error {
		extra = append(extra, &Message{ID: d.ID, Tenant: d.Tenant, SessionID: d.SessionID})
		return nil
	})
	if err != nil {
		return fmt.Errorf("list index documents: %w", err)
	}
	stored := make(map[string]bool, len(extra))
	err = ScanMessages(ctx, ix.store, func(m *Message) error {
		stored[m.ID] = true
		return nil
	}, func(d *DamagedRecord) { stored[d.MessageID] = true })
	if err != nil {
		return fmt.Errorf("read store: %w", err)
	}
	extra = slices.DeleteFunc(extra, func(m *Message) bool { return stored[m.ID] })
	if len(extra) == 0 {
		return nil
	}
	ix.log.Info("deleting index documents of messages the store no longer has", "count", len(extra))
	if err := ix.index.Apply(ctx, IndexBatch{Deletes: extra, Watermark: upTo}); err != nil {
		return fmt.Errorf("delete stale index documents: %w", err)
	}
	return nil
}

// rebuildWith is rebuild telling done how many messages each batch indexed.
func (ix *indexer) rebuildWith(ctx context.Context, upTo uint64, done func(int)) (int, error) {
	start := time.Now()
	indexed := 0
	total, err := ix.storedMessages(ctx)
	if err != nil {
		return 0, err
	}
	// A damaged record is left out and logged, not a reason to refuse to
	// start: verify reports it, and the rest of the store is served.
	scan := func(fn func(*Message) error) error {
		return ScanMessages(ctx, ix.store, fn, func(d *DamagedRecord) {
			ix.log.Error("damaged record left out of the index (run ctxd verify)", "err", d)
		})
	}
	n, err := inBatches(scan,
		func(batch []*Message) error {
			if err := ix.index.Apply(ctx, IndexBatch{Upserts: batch, Watermark: upTo}); err != nil {
				return err
			}
			indexed += len(batch)
			// Info, not Debug: a rebuild of a large store takes minutes
			// before the server answers, and the operator should see it move.
			ix.log.Info("rebuilding index", "indexed", indexed, "of", total)
			done(len(batch))
			return nil
		})
	if err != nil {
		return n, fmt.Errorf("rebuild index: %w", err)
	}
	ix.watermark.Store(upTo)
	ix.log.Info("index rebuilt", "messages", n, "took", time.Since(start).Round(time.Millisecond))
	return n, nil
}

// trim lets the store forget changes the index holds durably.
func (ix *indexer) trim(ctx context.Context) error {
	wm, err := ix.index.Watermark()
	if err != nil || wm == 0 {
		return err
	}
	return ix.store.TrimChanges(ctx, wm)
}

// syncIndex brings the index up to the store's latest change before a write
// is answered, so the caller can search what it just wrote. A failure is
// logged, not returned: the write is durable and the index catches up in the
// background (and /readyz says so meanwhile).
func (s *Service) syncIndex(ctx context.Context) {
	last, err := s.Store.LastSeq(ctx)
	if err == nil {
		err = s.ix.sync(context.WithoutCancel(ctx), last)
	}
	if err != nil {
		s.Logger.Error("index update failed after a durable write; retrying in background", "err", err)
	}
}

// syncIndexSoon brings the index up to date in the background, within
// indexLag; one pending catch-up covers every change before it starts.
// Close waits for it.
func (s *Service) syncIndexSoon() {
	if !s.syncQueued.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(1)
	s.bg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.bg.Done()
		select {
		case <-time.After(indexLag):
		case <-s.closing:
		}
		s.syncQueued.Store(false)
		s.syncIndex(context.Background())
	}()
}

// ScanMessages is the store's ScanMessages when it has one, else
// ForEachMessage (which stops at the first damaged record).
func ScanMessages(ctx context.Context, st Store, fn func(*Message) error, damaged func(*DamagedRecord)) error {
	if ds, ok := st.(DamageScanner); ok {
		return ds.ScanMessages(ctx, fn, damaged)
	}
	return st.ForEachMessage(ctx, fn)
}

// CatchUpIndex brings ix up to the store through the change log, the path
// the server takes at start, then lets the store forget what the index
// holds (admin runs it offline).
func CatchUpIndex(ctx context.Context, st Store, ix Index, log *slog.Logger) error {
	i := &indexer{store: st, index: ix, log: log}
	if err := i.catchUp(ctx, time.Now()); err != nil {
		return err
	}
	if err := i.trim(ctx); err != nil {
		return fmt.Errorf("trim change log: %w", err)
	}
	return nil
}

// RebuildIndex writes every stored message into ix afresh, marks it as up
// to upTo and trims the store's change log; done hears each batch. It
// returns how many documents it wrote.
func RebuildIndex(ctx context.Context, st Store, ix Index, log *slog.Logger, upTo uint64, done func(int)) (int, error) {
	i := &indexer{store: st, index: ix, log: log}
	n, err := i.rebuildWith(ctx, upTo, done)
	if err != nil {
		return n, err
	}
	if err := i.trim(ctx); err != nil {
		return n, fmt.Errorf("trim change log: %w", err)
	}
	return n, nil
}
