package boltstore

import (
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// releaseMapped takes the file's mapped pages out of the process's memory:
// they stay in the page cache, and a later read maps them again without
// I/O. A scan over a bucket whose pages are spread over the file (as the
// vectors' are, allocated beside each write's message records) faulted in
// the file around each page too: loading 300,000 vectors left 250 MB of
// the 359 MB file resident for a 57 MB bucket, counted in the process's
// RSS for as long as it ran.
//
// bbolt maps the file read-only and shared, so MADV_DONTNEED drops only
// the page table entries. tx holds the mapping in place (bbolt remaps only
// with no read transaction open); tx.Size() is the part of the file in use,
// within the mapping.
func releaseMapped(db *bolt.DB, tx *bolt.Tx) {
	base, size := db.Info().Data, tx.Size()
	if base == 0 || size <= 0 {
		return
	}
	// The raw call: the mapping is bbolt's, known here only by its address.
	// A failure leaves the pages mapped, as they were.
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, base, uintptr(size), unix.MADV_DONTNEED)
}
