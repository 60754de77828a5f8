package eventlog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// rotate shifts x.jsonl → x.1.jsonl → … → x.N.jsonl, dropping x.N, and
// opens a fresh x.jsonl. s.mu is held. If a rename fails the stream is left
// closed (s.f nil) and the next Log reopens x.jsonl and tries again, so a
// transient failure costs a rotation, not the log.
func (l *Log) rotate(s *stream) error {
	if err := s.f.Close(); err != nil {
		s.f = nil
		return fmt.Errorf("rotate %s: close: %w", s.name, err)
	}
	s.f = nil
	n := l.opts.MaxFiles
	if err := os.Remove(l.path(s.name, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotate %s: %w", s.name, err)
	}
	for i := n - 1; i >= 0; i-- {
		// Gaps (a file deleted by hand) are skipped, not fatal.
		if err := os.Rename(l.path(s.name, i), l.path(s.name, i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", s.name, err)
		}
	}
	if err := l.openFile(s); err != nil {
		return err
	}
	if l.opts.Sync {
		// With Sync the caller wants lines to survive a crash; a line in a
		// file whose name did not survive would not.
		if err := syncDir(l.dir); err != nil {
			return fmt.Errorf("rotate %s: %w", s.name, err)
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
