package boltstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"syscall"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// update runs fn in a write transaction and turns disk failures into
// errors the caller can act on: a full or read-only disk is a 503 that
// says so, not an internal error, and nothing of the transaction is kept.
// Every write goes through here, so every one lays out the file the same
// way (layoutTx).
func (s *Store) update(fn func(*bolt.Tx) error) (err error) {
	defer recoverPage(&err)
	return diskError(s.db.Update(func(tx *bolt.Tx) error {
		layoutTx(tx)
		return fn(tx)
	}))
}

// view runs fn in a read transaction.
func (s *Store) view(fn func(*bolt.Tx) error) (err error) {
	defer recoverPage(&err)
	return s.db.View(fn)
}

// recoverPage turns a panic of bbolt into an error. bbolt panics on a
// damaged page (an id past the end of the file, a page of the wrong type)
// instead of failing; its View and Update roll the transaction back on the
// way out, so the store stays usable and only the requests that touch that
// page fail, with an answer that says why, instead of the process dying or
// a bare 500.
func recoverPage(err *error) {
	if r := recover(); r != nil {
		*err = &memory.Error{Code: memory.EDAMAGED,
			Message: fmt.Sprintf("the store file is damaged (%v); `ctxd verify` on the stopped server reports what", r)}
	}
}

func diskError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return memory.Errorf(memory.EUNAVAILABLE, "store: the disk is full (%v); nothing of this request was stored: free space on the data dir's disk, then retry", err)
	case errors.Is(err, syscall.EROFS):
		return memory.Errorf(memory.EUNAVAILABLE, "store: the data dir's disk is read-only (%v); nothing of this request was stored", err)
	case errors.Is(err, syscall.EIO):
		return memory.Errorf(memory.EUNAVAILABLE, "store: disk I/O error (%v); nothing of this request was stored: check the disk", err)
	}
	return err
}

// ReserveDisk makes Append refuse new messages (503) while the data dir's
// disk has less than bytes free, or less than pct of it. The indexes and
// logs written after the store need room too, and Bleve does not survive a
// full disk gracefully (a segment that fails to persist panics later), so
// ctxd stops taking new data before the disk fills, as Elasticsearch does
// at its flood-stage watermark. Deletes and compactions still run, so space
// can be freed.
func (s *Store) ReserveDisk(bytes int64, pct float64) error {
	total, _, err := diskSpace(filepath.Dir(s.path))
	if err != nil {
		return err
	}
	s.reserve.Store(min(bytes, int64(pct*float64(total))))
	return nil
}

func (s *Store) checkFree() error {
	reserve := s.reserve.Load()
	if reserve <= 0 {
		return nil
	}
	_, free, err := diskSpace(filepath.Dir(s.path))
	if err != nil {
		return nil // cannot tell: the write itself will say if the disk is full
	}
	if free >= reserve+s.spare.Load() && s.spareShort() {
		// A delete used the spare: the disk has room again to put it back.
		if err := s.KeepSpare(s.spare.Load()); err != nil {
			return memory.Errorf(memory.EUNAVAILABLE, "store: the disk has room again but the spare file could not be refilled (%v); nothing of this request was stored", err)
		}
	}
	if free < reserve {
		return memory.Errorf(memory.EUNAVAILABLE, "store: the disk is almost full (%d bytes free, %d kept in reserve for the indexes); nothing of this request was stored: free space on the data dir's disk, or delete sessions, then retry", free, reserve)
	}
	return nil
}

func diskSpace(dir string) (total, free int64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return int64(st.Blocks) * int64(st.Bsize), int64(st.Bavail) * int64(st.Bsize), nil
}
