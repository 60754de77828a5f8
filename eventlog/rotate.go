package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/klauspost/compress/gzip"
)

// Rotated files are gzip-compressed (x.1.jsonl.gz …): JSONL events compress
// about eight times (the drops stream of 12 replayed coding-agent runs:
// 244 KB, 28 KB gzipped), so the MaxFiles rotated files of a stream take
// an eighth of the disk, and zcat, zgrep and `ctxd logs` read them. Plain
// rotated files of earlier versions (x.1.jsonl) are still read and
// rotated; a generation that has both (a crash while compressing) is its
// .gz, complete since it is renamed into place only once written.

// rotate shifts x.jsonl → x.1.jsonl.gz → … → x.N.jsonl.gz, dropping x.N,
// and opens a fresh x.jsonl. s.mu is held. If a rename fails the stream is
// left closed (s.f nil) and the next Log reopens x.jsonl and tries again,
// so a transient failure costs a rotation, not the log.
func (l *Log) rotate(s *stream) error {
	if err := s.f.Close(); err != nil {
		s.f = nil
		return fmt.Errorf("rotate %s: close: %w", s.name, err)
	}
	s.f = nil
	n := l.opts.MaxFiles
	for _, p := range []string{l.path(s.name, n), l.plainPath(s.name, n)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("rotate %s: %w", s.name, err)
		}
	}
	for i := n - 1; i >= 1; i-- {
		// Gaps (a file deleted by hand) are skipped, not fatal.
		for _, p := range [][2]string{{l.path(s.name, i), l.path(s.name, i+1)}, {l.plainPath(s.name, i), l.plainPath(s.name, i+1)}} {
			if err := os.Rename(p[0], p[1]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("rotate %s: %w", s.name, err)
			}
		}
	}
	if err := os.Rename(l.path(s.name, 0), l.plainPath(s.name, 1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("rotate %s: %w", s.name, err)
	}
	// Then compressed. If that fails the file stays plain: nothing is
	// lost, and it is read as it is.
	if err := l.compress(l.plainPath(s.name, 1), l.path(s.name, 1)); err == nil {
		os.Remove(l.plainPath(s.name, 1))
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

// compress gzips the plain file at from into to: written to a temporary
// file, synced, then renamed to its name.
func (l *Log) compress(from, to string) error {
	text, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	tmp := to + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	z := gzip.NewWriter(f)
	_, err = z.Write(text)
	err = errors.Join(err, z.Close())
	if err == nil {
		err = f.Sync()
	}
	err = errors.Join(err, f.Close())
	if err == nil {
		err = os.Rename(tmp, to)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// text returns a generation's text: the current file as it is, a rotated
// one decompressed (or plain, written by an earlier version).
func (g generation) text() (io.ReaderAt, int64, error) {
	if !g.gz {
		return g.f, g.size, nil
	}
	z, err := gzip.NewReader(io.NewSectionReader(g.f, 0, g.size))
	if err != nil {
		return nil, 0, err
	}
	text, err := io.ReadAll(z)
	if err != nil && len(text) == 0 {
		return nil, 0, err
	}
	// A damaged end costs the lines after the damage, not the file's.
	return bytes.NewReader(text), int64(len(text)), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
