package boltstore

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	bolt "go.etcd.io/bbolt"
)

// The spare is a file of zeroes next to the store that a delete gives back
// to the filesystem when the disk is full. bbolt writes a transaction's
// pages copy-on-write: a delete needs free pages before it frees any, and
// on a disk filled to the last byte by someone else (the store's own
// reserve, ReserveDisk, only stops ctxd's writes) deleting a session of
// 1,000 messages answered 503, so the disk could not be emptied through
// the API. The spare's blocks are real (zeroes written, not a sparse file),
// so removing it frees them.

// spareSuffix names the spare after the store file: ctxd.db.spare.
const spareSuffix = ".spare"

// KeepSpare makes sure the spare holds size bytes, writing what is
// missing; 0 removes it. A disk too full to write it leaves it short, which
// is reported; the next call (at start, or from Append's disk check once
// the disk has room) fills it.
func (s *Store) KeepSpare(size int64) error {
	s.spare.Store(size)
	path := s.path + spareSuffix
	if size <= 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove spare %s: %w", path, err)
		}
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open spare %s: %w", path, err)
	}
	defer f.Close()
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return fmt.Errorf("spare %s: %w", path, err)
	}
	zero := make([]byte, 64<<10)
	for end < size {
		n, err := f.Write(zero[:min(int64(len(zero)), size-end)])
		end += int64(n)
		if err != nil {
			return fmt.Errorf("write spare %s (%d of %d bytes): %w", path, end, size, err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync spare %s: %w", path, err)
	}
	return nil
}

// spareShort reports whether the spare is wanted and not whole, cheaply:
// Append's disk check asks on every write.
func (s *Store) spareShort() bool {
	size := s.spare.Load()
	if size <= 0 {
		return false
	}
	fi, err := os.Stat(s.path + spareSuffix)
	return err != nil || fi.Size() < size
}

// releaseSpare removes the spare; it reports whether there was one to free.
func (s *Store) releaseSpare() bool {
	return os.Remove(s.path+spareSuffix) == nil
}

// updateFreeing is update for transactions that free space (deletes): when
// the disk is full it gives the spare back to the filesystem and runs fn
// again. A transaction that failed to commit left nothing behind, so
// running it twice is running it once.
func (s *Store) updateFreeing(fn func(*bolt.Tx) error) error {
	run := func() error {
		return s.db.Update(func(tx *bolt.Tx) error {
			layoutTx(tx)
			return fn(tx)
		})
	}
	err := run()
	if (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)) && s.releaseSpare() {
		err = run()
	}
	return diskError(err)
}
