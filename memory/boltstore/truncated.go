package boltstore

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
)

// checkNotTruncated refuses a store file shorter than the pages its meta
// pages say it holds: bbolt maps the file and would die of a SIGBUS reading
// past its end (a truncated copy, a disk that lost the tail), where the
// operator needs a message. A missing or empty file is not this (it is a new
// store, or one the caller reports as lost).
func checkNotTruncated(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // missing: bbolt creates it, or reports why it cannot
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return nil
	}
	const (
		magic      = 0xED0CDAED
		pageHeader = 16 // id, flags, count, overflow
	)
	// A meta page: magic, version, page size, flags (4 bytes each), the
	// root bucket (16), the freelist page (8), the high-water page id (8), at 40.
	var meta [pageHeader + 56]byte
	for _, off := range []int64{0, -1} {
		if off < 0 {
			// The second meta page is one page in: the page size the first
			// one names (or, when it is garbage, bbolt's own check tells).
			ps := binary.LittleEndian.Uint32(meta[pageHeader+8:])
			if ps == 0 || ps > 1<<20 {
				return nil
			}
			off = int64(ps)
		}
		if _, err := f.ReadAt(meta[:], off); err != nil {
			if err == io.EOF && off > 0 {
				return fmt.Errorf("store %s is truncated: %d bytes, not even its two meta pages", path, fi.Size())
			}
			return nil
		}
		if binary.LittleEndian.Uint32(meta[pageHeader:]) != magic {
			continue
		}
		pageSize := int64(binary.LittleEndian.Uint32(meta[pageHeader+8:]))
		hwm := int64(binary.LittleEndian.Uint64(meta[pageHeader+40:]))
		if pageSize > 0 && hwm > 0 && hwm < 1<<40 && hwm*pageSize > fi.Size() {
			return fmt.Errorf("store %s is truncated: %d bytes, its meta page at %d says %d pages of %d bytes (%d bytes); "+
				"restore it from a backup (ctxd import), or move it aside and start with --allow-empty-store",
				path, fi.Size(), off, hwm, pageSize, hwm*pageSize)
		}
	}
	return nil
}
