package server

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
)

// The store is the truth and the only copy of most of it; the index and the
// cold mirror are derived from it. A store that is missing, 0 bytes long or
// new next to an index or a mirror that holds data was lost (deleted,
// truncated, a volume not mounted), not never written: starting on it would
// serve an empty server as ready, and a later `verify --repair` would
// delete the mirror files, the last copy of the cold originals, as orphans.
// So start refuses, unless told to start empty on purpose.

// storeFileEmpty reports whether the store file is missing or 0 bytes: the
// store is empty, and opening it would write a new one.
func storeFileEmpty(dataDir string) (bool, error) {
	st, err := os.Stat(StorePath(dataDir))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("stat store: %w", err)
	}
	return st.Size() == 0, nil
}

// storeIsNew reports whether an opened store has never held anything: no
// change was ever logged (the sequence survives trims and deletes).
func storeIsNew(ctx context.Context, st *boltstore.Store) (bool, error) {
	last, err := st.LastSeq(ctx)
	if err != nil {
		return false, fmt.Errorf("read store seq: %w", err)
	}
	if last > 0 {
		return false, nil
	}
	tenants, err := st.Tenants(ctx)
	if err != nil {
		return false, fmt.Errorf("list tenants: %w", err)
	}
	return len(tenants) == 0, nil
}

// refuseLostStore returns an error naming what the data dir holds when its
// store is empty but its index or cold mirror is not, unless allow. It only
// reads: the index is opened read-only, the mirror is listed.
func refuseLostStore(log *slog.Logger, dataDir string, allow bool) error {
	held, err := derivedData(dataDir)
	if err != nil || len(held) == 0 {
		return err
	}
	what := strings.Join(held, " and ")
	if allow {
		log.Warn("starting on an empty store although the data dir holds data, as --allow-empty-store says",
			"store", StorePath(dataDir), "held", what)
		return nil
	}
	return memory.Errorf(memory.ECONFLICT, "data dir %s has an empty or missing store (%s) but %s: "+
		"the store was lost. Restore it from a backup; or bring the cold originals back from the mirror with "+
		"`ctxd restore-cold --data-dir %s`; or start empty on purpose with --allow-empty-store "+
		"(CTXD_ALLOW_EMPTY_STORE, allow_empty_store)", dataDir, StorePath(dataDir), what, dataDir)
}

// refuseRolledBack is the refusal to start on a store that lost writes its
// index holds (err is index.ErrAhead's).
func refuseRolledBack(dataDir string, err error) error {
	return memory.Errorf(memory.ECONFLICT, "data dir %s: the store was rolled back: %v. "+
		"`ctxd verify --data-dir %s` names the messages the index holds and the store lacks (index_extra). "+
		"Restore ctxd.db from a backup that has them; or start on the store as it is with --allow-store-rollback "+
		"(CTXD_ALLOW_STORE_ROLLBACK, allow_store_rollback), which rebuilds the index from it and loses them", dataDir, err, dataDir)
}

// derivedData describes what the index and the cold mirror of dataDir hold
// (nothing: none). An index that cannot be opened says nothing either way.
func derivedData(dataDir string) ([]string, error) {
	var held []string
	x, err := index.Open(IndexPath(dataDir), index.Options{ReadOnly: true})
	switch {
	case errors.Is(err, index.ErrInUse):
		return nil, InUse(dataDir)
	case err == nil:
		wm, werr := x.Watermark()
		docs, _, cerr := x.Count()
		x.Close()
		if err := errors.Join(werr, cerr); err != nil {
			return nil, fmt.Errorf("read index: %w", err)
		}
		if wm > 0 || docs > 0 {
			held = append(held, fmt.Sprintf("its full-text index holds %d documents (up to change %d)", docs, wm))
		}
	case !errors.Is(err, index.ErrMissing) && !errors.Is(err, index.ErrCorrupt):
		return nil, err
	}
	cold, err := coldstore.OpenReadOnly(ColdPath(dataDir))
	if err != nil {
		return nil, err
	}
	files, err := cold.Sessions()
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		held = append(held, fmt.Sprintf("its cold mirror holds %d session files", len(files)))
	}
	return held, nil
}

// InUse is the error for a data dir another process holds.
func InUse(dir string) error {
	return memory.Errorf(memory.EUNAVAILABLE, "data dir %s is in use (is a ctxd server running? stop it first)", dir)
}
