// Package eventlog writes the server's observability logs: one JSONL file per
// stream under a directory, rotated by size.
//
// These logs explain what the server did (why a message was dropped, what a
// compaction cost); they are not a record anything is rebuilt from. The
// store is the truth. That is why a line is not fsynced by default: losing
// the last few events in a power cut is an acceptable price for not paying
// an fsync on every compaction step. Set Options.Sync to pay it.
package eventlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ctxd/ctxd/internal/clip"
	"github.com/ctxd/ctxd/memory"
)

// Stream names.
const (
	StreamCompaction    = "compaction"
	StreamDrops         = "drops"
	StreamRecoveries    = "recoveries"
	StreamContextHealth = "context-health"
	StreamPurges        = "purges"
	StreamEdits         = "edits"        // messages edited or deleted by clients
	StreamPromptCache   = "prompt-cache" // the upstream's prompt usage on each gateway answer
)

// Streams lists every stream in a stable order.
var Streams = []string{StreamCompaction, StreamDrops, StreamRecoveries, StreamContextHealth, StreamPurges, StreamEdits, StreamPromptCache}

// Defaults for Options.
const (
	DefaultMaxBytes = 10 << 20
	DefaultMaxFiles = 5
	// DefaultMaxString: a prompt's first 160 bytes say which prompt it was
	// (and fit a line of `ctxd logs`). Recovery events quoted up to 2,000
	// characters of it, one event per message recovered or sent
	// answer-only: replaying 10 coding-agent runs (1.41 MB of content)
	// wrote 7.6 MB of recoveries.jsonl.
	DefaultMaxString = 160
)

// ErrClosed is returned by Log after Close.
var ErrClosed = errors.New("eventlog: closed")

// Options tune a Log. The zero value is usable.
type Options struct {
	// MaxBytes is the size a stream's current file may reach before it is
	// rotated (DefaultMaxBytes if <= 0). A single event larger than this
	// still gets written, alone in its file.
	MaxBytes int64
	// MaxFiles is how many rotated files (x.1.jsonl.gz … x.N.jsonl.gz) a stream
	// keeps besides its current x.jsonl (DefaultMaxFiles if <= 0).
	MaxFiles int
	// Sync fsyncs every line. Off by default: see the package comment.
	Sync bool
	// MaxString is the longest string field an event keeps
	// (DefaultMaxString if <= 0; negative: no limit): a longer one is cut
	// at a character boundary and ends in "… (N bytes)", N its length.
	// Events explain; the text they quote is in the store.
	MaxString int
	// Now stamps events (time.Now if nil); tests inject a clock.
	Now func() time.Time
}

// Log is a set of JSONL streams in one directory. It is safe for concurrent
// use. It assumes it is the only writer of its directory: rotation renames
// files under its own lock, which another process would not see.
type Log struct {
	dir     string
	opts    Options
	streams map[string]*stream // fixed at Open, so read without a lock
}

var _ memory.EventLog = (*Log)(nil)

// stream is one JSONL file and its rotations. mu keeps a line whole and
// rotation out of a write's way; each stream has its own so a slow disk on
// one does not hold up the others.
type stream struct {
	name   string
	mu     sync.Mutex
	f      *os.File // nil after a failed rotation: the next Log reopens
	size   int64
	closed bool
}

// Open opens (creating if need be) every stream under dir. Existing files
// are appended to.
func Open(dir string, opts Options) (*Log, error) {
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = DefaultMaxBytes
	}
	if opts.MaxFiles <= 0 {
		opts.MaxFiles = DefaultMaxFiles
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxString == 0 {
		opts.MaxString = DefaultMaxString
	}
	// Events quote prompts and message text: keep them private to the server's user.
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("open event log %s: %w", dir, err)
	}
	// A rotation's compression a crash interrupted: its plain file is
	// still there.
	if tmps, err := filepath.Glob(filepath.Join(dir, "*.jsonl.gz.tmp")); err == nil {
		for _, p := range tmps {
			os.Remove(p)
		}
	}
	l := &Log{dir: dir, opts: opts, streams: make(map[string]*stream, len(Streams))}
	for _, name := range Streams {
		s := &stream{name: name}
		// Open eagerly so a directory we cannot write fails the server's
		// start, not the first compaction.
		if err := l.openFile(s); err != nil {
			l.Close()
			return nil, err
		}
		l.streams[name] = s
	}
	return l, nil
}

// Log appends event to the named stream with a "time" field added (it
// replaces any the caller set: the log owns the time). The caller's map is
// not modified. One event is one write(2) on an O_APPEND file under the
// stream's lock, so concurrent events never interleave.
func (l *Log) Log(name string, event map[string]any) error {
	s, err := l.stream(name)
	if err != nil {
		return err
	}
	line, err := l.encode(event)
	if err != nil {
		return fmt.Errorf("log %s event: %w", name, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.f == nil {
		if err := l.openFile(s); err != nil {
			return err
		}
	}
	if s.size > 0 && s.size+int64(len(line)) > l.opts.MaxBytes {
		if err := l.rotate(s); err != nil {
			return err
		}
	}
	n, err := s.f.Write(line)
	s.size += int64(n)
	if err != nil {
		return fmt.Errorf("log %s event to %s: %w", name, s.f.Name(), err)
	}
	if l.opts.Sync {
		if err := s.f.Sync(); err != nil {
			return fmt.Errorf("sync %s: %w", s.f.Name(), err)
		}
	}
	return nil
}

// Close closes every stream. Log fails with ErrClosed afterwards; Tail
// still works, as it reads the files.
func (l *Log) Close() error {
	var errs []error
	for _, s := range l.streams {
		s.mu.Lock()
		if s.f != nil {
			if err := s.f.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close %s: %w", s.f.Name(), err))
			}
			s.f = nil
		}
		s.closed = true
		s.mu.Unlock()
	}
	return errors.Join(errs...)
}

func (l *Log) stream(name string) (*stream, error) {
	// Only known names reach a path, so a name cannot point outside dir.
	s, ok := l.streams[name]
	if !ok {
		return nil, fmt.Errorf("event log: unknown stream %q (want one of %v)", name, Streams)
	}
	return s, nil
}

func (l *Log) encode(event map[string]any) ([]byte, error) {
	e := make(map[string]any, len(event)+1)
	for k, v := range event {
		if s, ok := v.(string); ok {
			v = clip.String(s, l.opts.MaxString)
		}
		e[k] = v
	}
	e["time"] = l.opts.Now().UTC().Format(time.RFC3339Nano)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Logs are read by people with jq and less: keep <, > and & as they are.
	enc.SetEscapeHTML(false)
	// Encode escapes newlines inside strings and ends with one '\n': one
	// event, one line.
	if err := enc.Encode(e); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// path is the file of a stream's generation i: 0 is the current file, the
// rotated ones are compressed (rotate.go).
func (l *Log) path(name string, i int) string {
	if i == 0 {
		return filepath.Join(l.dir, name+".jsonl")
	}
	return filepath.Join(l.dir, fmt.Sprintf("%s.%d.jsonl.gz", name, i))
}

// plainPath is a rotated generation's file before it is compressed (or as
// an earlier version left it).
func (l *Log) plainPath(name string, i int) string {
	return filepath.Join(l.dir, fmt.Sprintf("%s.%d.jsonl", name, i))
}

func (l *Log) openFile(s *stream) error {
	p := l.path(s.name, 0)
	// Read as well as write: see endLine.
	f, err := os.OpenFile(p, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open event stream %s: %w", p, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat event stream %s: %w", p, err)
	}
	size, err := endLine(f, fi.Size())
	if err != nil {
		f.Close()
		return fmt.Errorf("open event stream %s: %w", p, err)
	}
	s.f, s.size = f, size
	return nil
}

// endLine ends a line left open by a crash mid-write, so that the torn text
// costs one unreadable line and not also the first event after restart.
func endLine(f *os.File, size int64) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	last := make([]byte, 1)
	if _, err := f.ReadAt(last, size-1); err != nil {
		return size, err
	}
	if last[0] == '\n' {
		return size, nil
	}
	n, err := f.Write([]byte{'\n'})
	return size + int64(n), err
}
