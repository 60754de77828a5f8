package coldstore

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// tmpPrefix starts the names of Rewrite's temporary files. Escaped names
// never start with '.', so these cannot collide with a session's file.
const tmpPrefix = ".rewrite-"

// Store is a directory of per-session cold chunk files. It is safe for
// concurrent use; calls on one session are serialized, calls on different
// sessions run in parallel. One Store should own a directory: Open removes
// temporary files it finds, which may be another Store's work in progress.
type Store struct {
	dir   string
	locks keyedMutex
	// dirs is held shared while a tenant directory is made and a file put
	// in it, and exclusively while Remove deletes an empty tenant directory,
	// so Remove cannot delete a directory out from under a new file.
	dirs sync.RWMutex
	fs   fsOps
	ends ends
}

// fsOps are the operations tests replace to count fsyncs and inject
// failures (the tests run as root, where a read-only directory is no obstacle).
type fsOps struct {
	syncFile func(*os.File) error
	syncDir  func(path string) error
	write    func(f *os.File, b []byte) (int, error)
}

var realFS = fsOps{
	syncFile: (*os.File).Sync,
	syncDir: func(path string) error {
		d, err := os.Open(path)
		if err != nil {
			return err
		}
		defer d.Close()
		return d.Sync()
	},
	write: (*os.File).Write,
}

// SessionRef names one session with a cold file.
type SessionRef = struct{ Tenant, Session string }

// Open opens the store in dir, creating dir if need be, and removes the
// temporary files of rewrites a crash interrupted.
func Open(dir string) (*Store, error) {
	// Cold chunks are conversation text: private to the server's user.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open cold store %s: %w", dir, err)
	}
	s := &Store{dir: dir, fs: realFS}
	tenants, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("open cold store %s: %w", dir, err)
	}
	for _, t := range tenants {
		if !t.IsDir() {
			continue
		}
		stale, err := filepath.Glob(filepath.Join(dir, t.Name(), tmpPrefix+"*"))
		if err != nil {
			return nil, fmt.Errorf("open cold store %s: %w", dir, err)
		}
		for _, p := range stale {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("open cold store: remove stale %s: %w", p, err)
			}
		}
		if err := s.upgrade(filepath.Join(dir, t.Name())); err != nil {
			return nil, fmt.Errorf("open cold store: %w", err)
		}
	}
	return s, nil
}

// upgrade turns the plain JSONL files an earlier version wrote in a tenant
// directory into segment files, one segment each, their bytes as they
// were but for a torn last line (an append that never returned), so
// verify judges the lines as before. The new file is in place (atomic,
// synced) before the old one goes: a crash in between leaves both, the
// same lines twice, and the next Open does it again.
func (s *Store) upgrade(dir string) error {
	olds, err := filepath.Glob(filepath.Join(dir, "*"+legacyExt))
	if err != nil {
		return err
	}
	for _, old := range olds {
		name := strings.TrimSuffix(filepath.Base(old), legacyExt)
		if fi, err := os.Lstat(old); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		if _, err := unescape(name); err != nil {
			continue // not a file coldstore wrote
		}
		text, err := os.ReadFile(old)
		if err != nil {
			return err
		}
		text = text[:bytes.LastIndexByte(text, '\n')+1]
		path := filepath.Join(dir, name+ext)
		if len(text) > 0 {
			data, err := compressSegment(text)
			if err != nil {
				return err
			}
			if err := s.replace(dir, path, data); err != nil {
				return fmt.Errorf("upgrade %s: %w", old, err)
			}
		}
		if err := os.Remove(old); err != nil {
			return err
		}
		if err := s.fs.syncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// OpenReadOnly opens the store in dir for reading only: unlike Open it
// neither creates dir nor removes what a crash left, so `ctxd verify`
// without --repair changes nothing. A missing dir lists no sessions.
func OpenReadOnly(dir string) (*Store, error) {
	if _, err := os.Stat(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open cold store %s: %w", dir, err)
	}
	return &Store{dir: dir, fs: realFS}, nil
}

// paths returns a session's tenant directory and file.
func (s *Store) paths(tenant, session string) (dir, file string, err error) {
	t, err := element("tenant", tenant, "")
	if err != nil {
		return "", "", err
	}
	f, err := element("session", session, ext)
	if err != nil {
		return "", "", err
	}
	dir = filepath.Join(s.dir, t)
	return dir, filepath.Join(dir, f), nil
}

// ensureDir makes a tenant directory. Its name is synced with the first
// file put in it (syncDirs), so it is not synced here.
func (s *Store) ensureDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// Remove deletes a session's cold file; a session without one is not an
// error. The removal is synced, as purges must not come back after a crash.
func (s *Store) Remove(tenant, session string) error {
	dir, path, err := s.paths(tenant, session)
	if err != nil {
		return err
	}
	unlock := s.locks.lock(path)
	defer unlock()
	s.ends.forget(path)
	// A plain file of an earlier version is there only if the store was
	// never opened for writing since (Open upgrades them).
	gone := 0
	for _, p := range []string{path, legacyPath(path)} {
		if err := os.Remove(p); err == nil {
			gone++
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove cold chunks %s: %w", p, err)
		}
	}
	if gone == 0 {
		return nil
	}
	if err := s.fs.syncDir(dir); err != nil {
		return fmt.Errorf("remove cold chunks %s: sync dir: %w", path, err)
	}
	// Drop the tenant's directory if that was its last session, so deleted
	// tenants leave nothing behind. Failing because it is not empty is the
	// common case, not an error.
	s.dirs.Lock()
	os.Remove(dir)
	s.dirs.Unlock()
	return nil
}

// Sessions lists the sessions that have a cold file, by tenant then
// session. Files and directories coldstore did not name are ignored.
func (s *Store) Sessions() ([]SessionRef, error) {
	tenants, err := os.ReadDir(s.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // opened read-only, never created
	}
	if err != nil {
		return nil, fmt.Errorf("list cold sessions in %s: %w", s.dir, err)
	}
	var out []SessionRef
	for _, t := range tenants {
		tenant, err := unescape(t.Name())
		if !t.IsDir() || err != nil {
			continue
		}
		files, err := os.ReadDir(filepath.Join(s.dir, t.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while we listed
		}
		if err != nil {
			return nil, fmt.Errorf("list cold sessions of %q: %w", tenant, err)
		}
		seen := map[string]bool{}
		for _, f := range files {
			name, ok := strings.CutSuffix(f.Name(), ext)
			if !ok {
				name, ok = strings.CutSuffix(f.Name(), legacyExt)
			}
			if !ok || !f.Type().IsRegular() {
				continue
			}
			if session, err := unescape(name); err == nil && !seen[session] {
				seen[session] = true
				out = append(out, SessionRef{tenant, session})
			}
		}
	}
	// ReadDir sorts by escaped name, which is not quite the names' order.
	slices.SortFunc(out, func(a, b SessionRef) int {
		if c := strings.Compare(a.Tenant, b.Tenant); c != 0 {
			return c
		}
		return strings.Compare(a.Session, b.Session)
	})
	return out, nil
}

// keyedMutex is a mutex per key (a session's path), forgotten when no one
// holds or waits for it, so the map does not grow with every session ever seen.
type keyedMutex struct {
	mu sync.Mutex
	m  map[string]*refMutex
}

type refMutex struct {
	sync.Mutex
	refs int
}

func (k *keyedMutex) lock(key string) (unlock func()) {
	k.mu.Lock()
	if k.m == nil {
		k.m = make(map[string]*refMutex)
	}
	r := k.m[key]
	if r == nil {
		r = &refMutex{}
		k.m[key] = r
	}
	r.refs++
	k.mu.Unlock()

	r.Lock()
	return func() {
		r.Unlock()
		k.mu.Lock()
		if r.refs--; r.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
