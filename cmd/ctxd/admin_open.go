package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/admin"
	"github.com/ctxd/ctxd/memory/boltstore"
	"github.com/ctxd/ctxd/memory/pgstore"
)

// The pieces of a data dir, by path. serve.go opens the same paths.

// indexUse says how an admin verb wants the full-text index.
type indexUse int

const (
	indexNone  indexUse = iota // export: the store is enough
	indexOpen                  // verify, import: as it is (a corrupt one is moved aside)
	indexFresh                 // reindex: removed and made anew
	// indexRead is verify without --repair: the whole data dir is opened
	// read-only (store, index, cold mirror); an index that cannot be
	// opened is reported, not moved aside.
	indexRead
)

// dataDir is a data dir opened for an offline admin verb: the store first,
// so that a running server (which holds its lock) stops us before anything
// else is touched.
type dataDir struct {
	dir   string
	log   *slog.Logger
	store memory.Store
	index *index.Index
	cold  *coldstore.Store
	admin *admin.Admin
}

// openDataDir opens cfg.DataDir; create allows a new data dir (import).
func openDataDir(ctx context.Context, cfg Config, use indexUse, create bool, progress memory.Progress) (*dataDir, error) {
	d := &dataDir{dir: cfg.DataDir, log: server.NewLogger(cfg, os.Stderr)}
	if server.SharedStore(cfg.Store) {
		return openShared(ctx, d, cfg, progress)
	}
	if !create {
		st, err := os.Stat(server.StorePath(cfg.DataDir))
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("data dir %s has no store (%s): is it a ctxd data dir?", cfg.DataDir, server.StorePath(cfg.DataDir))
		}
		// Opening it would write a new, empty store over the evidence.
		if err == nil && st.Size() == 0 {
			return nil, fmt.Errorf("data dir %s has an empty store (%s is 0 bytes): restore it from a backup, or bring the cold originals back with `ctxd restore-cold`",
				cfg.DataDir, server.StorePath(cfg.DataDir))
		}
	}
	readOnly := use == indexRead
	st, err := boltstore.Open(server.StorePath(cfg.DataDir), readOnly)
	if err != nil {
		return nil, err
	}
	d.store = st
	var indexErr error
	if err := d.openIndex(cfg, use); (readOnly && (errors.Is(err, index.ErrCorrupt) || errors.Is(err, index.ErrNoAccess))) || errors.Is(err, index.ErrMissing) {
		indexErr = err // verify reports it
	} else if err != nil {
		d.Close()
		return nil, err
	}
	openCold := coldstore.Open
	if readOnly {
		openCold = coldstore.OpenReadOnly
	}
	if d.cold, err = openCold(server.ColdPath(cfg.DataDir)); err != nil {
		d.Close()
		return nil, err
	}
	d.admin = d.newAdmin(cfg, progress, indexErr)
	return d, nil
}

func (d *dataDir) newAdmin(cfg Config, progress memory.Progress, indexErr error) *admin.Admin {
	m := NewMain(cfg)
	m.Logger = d.log
	a := &admin.Admin{Store: d.store, Logger: d.log, Progress: progress, Embedder: m.OpenEmbedder, IndexErr: indexErr}
	if d.cold != nil { // none on PostgreSQL
		a.Cold = coldstore.Mirror{Store: d.cold}
	}
	if d.index != nil {
		a.Index, a.Docs = d.index, d.index
	}
	return a
}

// openShared opens a PostgreSQL store (--store) for an admin verb: the
// database is the whole truth, so no index is opened (each node's catches
// up from the change feed) and no cold mirror (the cold originals are rows
// of the database, as on the nodes).
func openShared(ctx context.Context, d *dataDir, cfg Config, progress memory.Progress) (*dataDir, error) {
	st, err := pgstore.Open(ctx, cfg.Store, pgstore.Options{})
	if err != nil {
		return nil, err
	}
	d.store = st
	d.admin = d.newAdmin(cfg, progress, nil)
	return d, nil
}

func (d *dataDir) openIndex(cfg Config, use indexUse) error {
	if use == indexNone {
		return nil
	}
	dir := server.IndexPath(cfg.DataDir)
	opts, err := server.IndexOptions(cfg)
	if err != nil {
		return err
	}
	switch use {
	case indexRead:
		opts.Texts, opts.ReadOnly = d.store, true
		d.index, err = index.Open(dir, opts)
	case indexFresh:
		if err := index.Remove(dir); err != nil {
			return err
		}
		opts.Texts = d.store
		d.index, err = index.Open(dir, opts)
	default:
		// The admin verbs that write are asked for by an operator who
		// has read verify's report: an index ahead of the store is moved
		// aside (kept) and rebuilt, and the log says so.
		d.index, err = index.OpenOrRebuild(d.log, dir, opts, d.store, true)
	}
	if errors.Is(err, index.ErrInUse) {
		return server.InUse(cfg.DataDir)
	}
	return err
}

// Close closes the index, then the store; a second call does nothing.
func (d *dataDir) Close() error {
	var errs []error
	if d.index != nil {
		errs = append(errs, d.index.Close())
		d.index = nil
	}
	if d.store != nil {
		errs = append(errs, d.store.Close())
		d.store = nil
	}
	return errors.Join(errs...)
}
