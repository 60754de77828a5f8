package coldstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DamageError reports the lines of a session's file that Read could not
// use. Read returns it together with every chunk it could read, so a caller
// that only wants what is there can take the chunks and move on, and
// `verify` can repair the file with Rewrite.
type DamageError struct {
	Path string
	// TornBytes is the length of a last line with no newline: an Append cut
	// short by a crash. Its chunks were never acknowledged. 0 if none.
	TornBytes int
	// BadLines are the 1-based numbers of complete lines that are not
	// chunks of this session (edited by hand, or disk damage).
	BadLines []int
}

func (e *DamageError) Error() string {
	msg := fmt.Sprintf("cold chunks %s:", e.Path)
	if e.TornBytes > 0 {
		msg += fmt.Sprintf(" last line torn (%d bytes without a newline)", e.TornBytes)
		if len(e.BadLines) > 0 {
			msg += ";"
		}
	}
	if n := len(e.BadLines); n > 0 {
		msg += fmt.Sprintf(" %d unreadable line(s), first line %d", n, e.BadLines[0])
	}
	return msg
}

// Read returns a session's chunks in file order; a session without a file
// has none (nil, nil). If some lines are damaged it returns the good chunks
// and a *DamageError; any other error comes with no chunks.
func (s *Store) Read(tenant, session string) ([]Chunk, error) {
	_, path, err := s.paths(tenant, session)
	if err != nil {
		return nil, err
	}
	// Taking the session lock keeps an Append in progress from looking
	// like a torn line.
	unlock := s.locks.lock(path)
	defer unlock()

	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cold chunks %s: %w", path, err)
	}
	defer f.Close()

	var chunks []Chunk
	dmg := DamageError{Path: path}
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if err == io.EOF {
			dmg.TornBytes = len(line)
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read cold chunks %s: %w", path, err)
		}
		c, ok := decodeChunk(line)
		if !ok || c.Tenant != tenant || c.SessionID != session {
			dmg.BadLines = append(dmg.BadLines, n)
			continue
		}
		chunks = append(chunks, c)
	}
	if dmg.TornBytes > 0 || len(dmg.BadLines) > 0 {
		return chunks, &dmg
	}
	return chunks, nil
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
