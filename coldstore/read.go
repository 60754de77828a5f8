package coldstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// DamageError reports the parts of a session's file that Read could not
// use. Read returns it together with every chunk it could read, so a caller
// that only wants what is there can take the chunks and move on, and
// `verify` can repair the file with Rewrite.
type DamageError struct {
	Path string
	// TornBytes is the length of an end cut short: a last segment, or a
	// last line with no newline. An Append a crash interrupted; its chunks
	// were never acknowledged. 0 if none.
	TornBytes int
	// BadLines are the 1-based numbers (as zcat prints them) of complete
	// lines that are not chunks of this session (edited by hand, or disk
	// damage).
	BadLines []int
	// BadSegments counts the runs of compressed bytes that do not read
	// back (a segment that fails its checksum, or bytes that are no
	// segment), BadBytes their length: their lines are lost from the file.
	BadSegments, BadBytes int
}

func (e *DamageError) Error() string {
	var parts []string
	if e.TornBytes > 0 {
		parts = append(parts, fmt.Sprintf("last line torn (%d bytes cut short)", e.TornBytes))
	}
	if e.BadSegments > 0 {
		parts = append(parts, fmt.Sprintf("%d damaged compressed segment(s) (%d bytes)", e.BadSegments, e.BadBytes))
	}
	if n := len(e.BadLines); n > 0 {
		parts = append(parts, fmt.Sprintf("%d unreadable line(s), first line %d", n, e.BadLines[0]))
	}
	return fmt.Sprintf("cold chunks %s: %s", e.Path, strings.Join(parts, "; "))
}

// Read returns a session's chunks in file order; a session without a file
// has none (nil, nil). If some of it is damaged it returns the good chunks
// and a *DamageError; any other error comes with no chunks.
func (s *Store) Read(tenant, session string) ([]Chunk, error) {
	_, path, err := s.paths(tenant, session)
	if err != nil {
		return nil, err
	}
	// Taking the session lock keeps an Append in progress from looking
	// like a torn segment.
	unlock := s.locks.lock(path)
	defer unlock()

	texts, dmg, err := s.readText(path)
	if err != nil || texts == nil {
		return nil, err
	}
	var chunks []Chunk
	n := 0
	for i, text := range texts {
		for len(text) > 0 {
			n++
			line := text
			if j := bytes.IndexByte(text, '\n'); j >= 0 {
				line, text = text[:j+1], text[j+1:]
			} else {
				text = nil
				if i == len(texts)-1 && dmg.TornBytes == 0 {
					dmg.TornBytes = len(line)
					break
				}
			}
			c, ok := decodeChunk(line)
			if !ok || c.Tenant != tenant || c.SessionID != session {
				dmg.BadLines = append(dmg.BadLines, n)
				continue
			}
			chunks = append(chunks, c)
		}
	}
	if dmg.TornBytes > 0 || len(dmg.BadLines) > 0 || dmg.BadSegments > 0 {
		return chunks, dmg
	}
	return chunks, nil
}

// readText reads a session's file as the texts of its segments, nil if
// there is no file. A plain JSONL file of an older version (still there
// when the store is opened read-only) reads as one segment.
func (s *Store) readText(path string) ([][]byte, *DamageError, error) {
	dmg := &DamageError{Path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		legacy := legacyPath(path)
		if data, err = os.ReadFile(legacy); err == nil {
			dmg.Path = legacy
			return [][]byte{data}, dmg, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read cold chunks %s: %w", path, err)
	}
	sc := scanSegments(data)
	dmg.TornBytes, dmg.BadSegments, dmg.BadBytes = sc.torn, sc.bad, sc.badBytes
	texts := make([][]byte, 0, len(sc.segs)+1)
	for _, seg := range sc.segs {
		texts = append(texts, seg.text)
	}
	return texts, dmg, nil
}

// decodeChunk parses one line: exactly one JSON object with a chunk id.
// Metadata numbers come back as json.Number so integers survive exactly.
func decodeChunk(line []byte) (Chunk, bool) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var c Chunk
	if err := d.Decode(&c); err != nil || c.ChunkID == "" {
		return Chunk{}, false
	}
	if _, err := d.Token(); err != io.EOF {
		return Chunk{}, false // trailing data: two objects glued, or junk
	}
	return c, true
}
