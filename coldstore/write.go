package coldstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
)

// Append adds chunks to a session's file, as one new segment, and returns
// once they are on disk: the file is fsynced, and so are the directories
// when the file is new. Compaction calls it before it acknowledges, so an
// acknowledged compaction always has its cold copy.
//
// Chunks with an empty Tenant or SessionID get the call's; a chunk naming
// another session is refused, as it would end up in the wrong file.
func (s *Store) Append(tenant, session string, chunks []Chunk) error {
	if len(chunks) == 0 {
		return nil
	}
	dir, path, err := s.paths(tenant, session)
	if err != nil {
		return err
	}
	data, err := encodeSegment(tenant, session, chunks)
	if err != nil {
		return fmt.Errorf("append cold chunks %s: %w", path, err)
	}
	unlock := s.locks.lock(path)
	defer unlock()

	f, created, err := s.openAppend(dir, path)
	if err != nil {
		return fmt.Errorf("append cold chunks %s: %w", path, err)
	}
	defer f.Close()
	size, err := s.dropTornTail(f, path)
	if err != nil {
		return fmt.Errorf("append cold chunks %s: %w", path, err)
	}
	if _, err := s.fs.write(f, data); err != nil {
		// Take back a partial write so the file does not end in a torn
		// segment; if this fails too, the next Append or verify does it.
		if created {
			os.Remove(path)
		} else {
			f.Truncate(size)
		}
		return fmt.Errorf("append cold chunks %s: %w", path, err)
	}
	if err := s.fs.syncFile(f); err != nil {
		return fmt.Errorf("append cold chunks %s: sync: %w", path, err)
	}
	if created {
		if err := s.syncDirs(dir); err != nil {
			return fmt.Errorf("append cold chunks %s: %w", path, err)
		}
	}
	s.ends.set(path, size+int64(len(data)))
	if err := s.compactAt(dir, path, size, size+int64(len(data))); err != nil {
		// The chunks are on disk; the file is as it was with them.
		return fmt.Errorf("append cold chunks %s: chunks stored, but compacting the file failed: %w", path, err)
	}
	return nil
}

// Rewrite replaces a session's file with chunks, atomically: a crash leaves
// the old file or the new one, never a mix. Rewriting with no chunks removes
// the file. Recoveries, purges and repairs use it.
//
// Rewriting what Read returned is a read-modify-write: the caller must keep
// Appends to the same session out of the gap (compaction's per-session
// lock), or chunks appended in between are lost from the file.
func (s *Store) Rewrite(tenant, session string, chunks []Chunk) error {
	if len(chunks) == 0 {
		return s.Remove(tenant, session)
	}
	dir, path, err := s.paths(tenant, session)
	if err != nil {
		return err
	}
	data, err := encodeSegment(tenant, session, chunks)
	if err != nil {
		return fmt.Errorf("rewrite cold chunks %s: %w", path, err)
	}
	unlock := s.locks.lock(path)
	defer unlock()
	if err := s.replace(dir, path, data); err != nil {
		return fmt.Errorf("rewrite cold chunks %s: %w", path, err)
	}
	return nil
}

// replace puts data in place of a session's file, atomically (the caller
// holds the session's lock).
func (s *Store) replace(dir, path string, data []byte) error {
	s.dirs.RLock()
	defer s.dirs.RUnlock()

	_, err := os.Stat(path)
	created := errors.Is(err, fs.ErrNotExist)
	if err := s.ensureDir(dir); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, tmpPrefix+"*")
	if err != nil {
		return err
	}
	renamed := false
	defer func() {
		if !renamed {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := s.fs.write(tmp, data); err != nil {
		return fmt.Errorf("write %s: %w", tmp.Name(), err)
	}
	// Without this sync a crash after the rename could leave the new name
	// on an empty file: the old data gone and the new not there.
	if err := s.fs.syncFile(tmp); err != nil {
		return fmt.Errorf("sync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	renamed = true
	s.ends.set(path, int64(len(data)))
	if created {
		err = s.syncDirs(dir)
	} else {
		err = s.fs.syncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}

// openAppend opens a session's file for appending, creating it (and its
// tenant directory) if need be, and says whether it did.
func (s *Store) openAppend(dir, path string) (f *os.File, created bool, err error) {
	s.dirs.RLock()
	defer s.dirs.RUnlock()
	if err := s.ensureDir(dir); err != nil {
		return nil, false, err
	}
	// Read as well as append: dropTornTail looks at the end.
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE|os.O_EXCL, 0o600)
	if err == nil {
		return f, true, nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return nil, false, err
	}
	f, err = os.OpenFile(path, os.O_RDWR|os.O_APPEND, 0)
	return f, false, err
}

// syncDirs makes a new file's name durable: its tenant directory, and the
// root too in case the tenant directory is new. Another goroutine may have
// made the tenant directory and not yet synced the root, so "did I make
// it" is not the question; one extra fsync per new session file is cheap.
func (s *Store) syncDirs(dir string) error {
	if err := s.fs.syncDir(dir); err != nil {
		return err
	}
	return s.fs.syncDir(s.dir)
}

// dropTornTail cuts a torn last segment off a file and returns its size.
// A torn segment is an Append that crashed before it returned, so nobody
// was told its chunks were stored; appending after it would hide the next
// segment from zcat. Finding one means reading the file, so the end each
// write left is remembered and a file still that size is not read again.
// Damage elsewhere in the file is left for verify and reconciliation,
// which rebuild it from the store.
func (s *Store) dropTornTail(f *os.File, path string) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	if size == 0 || s.ends.get(path) == size {
		return size, nil
	}
	data := make([]byte, size)
	if _, err := f.ReadAt(data, 0); err != nil {
		return 0, err
	}
	torn := scanSegments(data).torn
	if torn == 0 {
		return size, nil
	}
	if err := f.Truncate(size - int64(torn)); err != nil {
		return size, fmt.Errorf("drop torn last segment: %w", err)
	}
	return size - int64(torn), nil
}

// ends remembers, per file, the size the store's last write left it at,
// which ends on a whole segment.
type ends struct {
	mu sync.Mutex
	m  map[string]int64
}

func (e *ends) get(path string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n, ok := e.m[path]; ok {
		return n
	}
	return -1
}

func (e *ends) set(path string, n int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = make(map[string]int64)
	}
	e.m[path] = n
}

func (e *ends) forget(path string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.m, path)
}

// encodeSegment is chunks as one segment of JSONL.
func encodeSegment(tenant, session string, chunks []Chunk) ([]byte, error) {
	text, err := encode(tenant, session, chunks)
	if err != nil {
		return nil, err
	}
	return compressSegment(text)
}

// encode writes chunks as JSONL, one line each.
func encode(tenant, session string, chunks []Chunk) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// People read these files: keep <, > and & in content as written.
	enc.SetEscapeHTML(false)
	for i, c := range chunks {
		if c.ChunkID == "" {
			return nil, fmt.Errorf("chunk %d: empty chunk_id", i)
		}
		if c.Tenant == "" {
			c.Tenant = tenant
		}
		if c.SessionID == "" {
			c.SessionID = session
		}
		if c.Tenant != tenant || c.SessionID != session {
			return nil, fmt.Errorf("chunk %s belongs to %q/%q, not %q/%q", c.ChunkID, c.Tenant, c.SessionID, tenant, session)
		}
		if err := enc.Encode(c); err != nil {
			return nil, fmt.Errorf("chunk %s: %w", c.ChunkID, err)
		}
	}
	return buf.Bytes(), nil
}
