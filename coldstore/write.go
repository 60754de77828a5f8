package coldstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Append adds chunks to a session's file and returns once they are on
// disk: the file is fsynced, and so are the directories when the file is
// new. Compaction calls it before it acknowledges, so an acknowledged
// compaction always has its cold copy.
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
	data, err := encode(tenant, session, chunks)
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
	size, err := dropTornTail(f)
	if err != nil {
		return fmt.Errorf("append cold chunks %s: %w", path, err)
	}
	if _, err := s.fs.write(f, data); err != nil {
		// Take back a partial write so the file does not end in a torn
		// line; if this fails too, the next Append or verify does it.
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
	data, err := encode(tenant, session, chunks)
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

// dropTornTail cuts a file back to its last newline and returns its size.
// Bytes after the last newline are an Append that crashed before it
// returned, so nobody was told they were stored; appending after them
// would glue the next chunk to them and lose it too.
func dropTornTail(f *os.File) (int64, error) {
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	end, err := lastLineEnd(f, size)
	if err != nil || end == size {
		return size, err
	}
	if err := f.Truncate(end); err != nil {
		return size, fmt.Errorf("drop torn last line: %w", err)
	}
	return end, nil
}

// lastLineEnd is the offset just after the last '\n' in r[0:size], 0 if none.
func lastLineEnd(r io.ReaderAt, size int64) (int64, error) {
	const block = 32 << 10
	buf := make([]byte, block)
	for end := size; end > 0; {
		start := max(0, end-block)
		b := buf[:end-start]
		if _, err := r.ReadAt(b, start); err != nil && !(errors.Is(err, io.EOF)) {
			return 0, err
		}
		if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
			return start + int64(i) + 1, nil
		}
		end = start
	}
	return 0, nil
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
