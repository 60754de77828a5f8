package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
)

// Tail returns the last n events of a stream for which filter is true (all
// events if filter is nil, all matching events if n <= 0), oldest first,
// reading back from the current file through the rotated ones.
//
// Lines that are not JSON objects (a line cut short by a crash) are skipped.
// Numbers come back as json.Number, so integers survive exactly.
//
// Tail works after Close and from another process (the CLI). Within this
// process it sees a consistent snapshot; across processes a rotation during
// Tail can hide one file's events, but never repeats or reorders any (the
// files are opened oldest first, and an open file follows its renames).
func (l *Log) Tail(name string, n int, filter func(map[string]any) bool) ([]map[string]any, error) {
	s, err := l.stream(name)
	if err != nil {
		return nil, err
	}
	files, err := l.openGenerations(s)
	defer func() {
		for _, f := range files {
			if f.f != nil {
				f.f.Close()
			}
		}
	}()
	if err != nil {
		return nil, err
	}

	var out []map[string]any // newest first until the end
	done := false
	for i := len(files) - 1; i >= 0 && !done; i-- {
		g := files[i]
		text, size, err := g.text()
		if err != nil {
			return nil, fmt.Errorf("tail %s: read %s: %w", name, g.f.Name(), err)
		}
		err = scanBackward(text, size, func(line []byte) bool {
			e, ok := decode(line)
			if !ok || (filter != nil && !filter(e)) {
				return true
			}
			out = append(out, e)
			done = n > 0 && len(out) >= n
			return !done
		})
		if err != nil {
			return nil, fmt.Errorf("tail %s: read %s: %w", name, g.f.Name(), err)
		}
	}
	slices.Reverse(out)
	return out, nil
}

type generation struct {
	f    *os.File
	size int64
	gz   bool // a rotated file, compressed
}

// openGenerations opens a stream's files oldest first and notes their sizes,
// under the stream lock so that in-process writers neither rotate nor half
// write while it does. Reading happens after, without the lock.
func (l *Log) openGenerations(s *stream) ([]generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var gens []generation
	for i := l.opts.MaxFiles; i >= 0; i-- {
		f, err := os.Open(l.path(s.name, i))
		gz := i > 0
		if gz && errors.Is(err, fs.ErrNotExist) {
			gz = false
			f, err = os.Open(l.plainPath(s.name, i))
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return gens, fmt.Errorf("tail %s: %w", s.name, err)
		}
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return gens, fmt.Errorf("tail %s: %w", s.name, err)
		}
		gens = append(gens, generation{f, fi.Size(), gz})
	}
	return gens, nil
}

func decode(line []byte) (map[string]any, bool) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var e map[string]any
	if err := d.Decode(&e); err != nil || e == nil {
		return nil, false
	}
	return e, true
}

// scanBackward calls fn on each non-empty line of r[0:size], last line
// first, until fn returns false. It reads in blocks from the end so that
// `ctxd logs -n 20` does not read 50 MiB of logs.
func scanBackward(r io.ReaderAt, size int64, fn func(line []byte) bool) error {
	const block = 64 << 10
	var carry []byte // the start of a line whose end is in a later block
	for pos := size; pos > 0; {
		n := min(int64(block), pos)
		pos -= n
		buf := make([]byte, n, n+int64(len(carry)))
		if m, err := r.ReadAt(buf, pos); m < len(buf) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF // the file shrank under us
			}
			return err
		}
		buf = append(buf, carry...)
		for {
			i := bytes.LastIndexByte(buf, '\n')
			if i < 0 {
				break
			}
			if line := buf[i+1:]; len(line) > 0 && !fn(line) {
				return nil
			}
			buf = buf[:i]
		}
		carry = buf
	}
	if len(carry) > 0 {
		fn(carry)
	}
	return nil
}
