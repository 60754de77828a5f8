package coldstore

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
)

// A chunk that goes cold again (recovered, then dropped again) is appended
// again: its last line is the current one. Replaying 10 coding-agent runs
// wrote 5,250 lines for 1,432 chunks, some 10 times over, and the files held
// 3.2 times the content of their current lines. And each Append is a
// segment of its own, compressed without what the segments before it said
// (small segments compress about half as well as a whole file). So when an
// Append takes a file past a step (every power of √2 from 8 KiB: ~3.4
// reads of the file in all for a file that grows to its size) the file is
// read and rewritten as one segment, with only each id's last line, in
// file order, atomically (as Rewrite). Every line stays whole JSON with
// its content; Read, verify and the purge's Rewrite see the same chunks as
// before (each id's last line). A file with damage is left as it is, for
// verify and reconciliation to rebuild from the store.
const minCompactSize = 8 << 10

// compactStep numbers the √2 steps of file sizes; -1 below the first.
func compactStep(size int64) int {
	if size < minCompactSize {
		return -1
	}
	return int(2 * math.Log2(float64(size)/minCompactSize))
}

// compactAt compacts the file at path if growing from before to after bytes
// passed a step. The caller holds the session's lock.
func (s *Store) compactAt(dir, path string, before, after int64) error {
	if compactStep(before) == compactStep(after) {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sc := scanSegments(data)
	if sc.torn > 0 || sc.bad > 0 || len(sc.segs) == 0 {
		return nil
	}
	var text []byte
	for _, seg := range sc.segs {
		if !bytes.HasSuffix(seg.text, []byte{'\n'}) {
			return nil // a line glued across segments: damage
		}
		text = append(text, seg.text...)
	}
	kept, dropped := currentLines(text)
	if len(sc.segs) == 1 && dropped == 0 {
		return nil
	}
	out, err := compressSegment(kept)
	if err != nil {
		return err
	}
	return s.replace(dir, path, out)
}

// currentLines returns data without the lines of chunks that have a later
// line, and how many bytes that left out. Lines that do not parse are kept:
// verify reports and repairs them.
func currentLines(data []byte) (kept []byte, dropped int) {
	type line struct {
		text []byte
		id   string
	}
	var lines []line
	last := map[string]int{}
	for _, text := range bytes.SplitAfter(data, []byte{'\n'}) {
		if len(text) == 0 {
			continue
		}
		l := line{text: text}
		if id, ok := lineChunkID(text); ok {
			l.id = id
			last[id] = len(lines)
		}
		lines = append(lines, l)
	}
	kept = make([]byte, 0, len(data))
	for i, l := range lines {
		if l.id != "" && last[l.id] != i {
			dropped += len(l.text)
			continue
		}
		kept = append(kept, l.text...)
	}
	return kept, dropped
}

// lineChunkID reads a line's chunk id, if it is a whole line of JSON with one.
func lineChunkID(text []byte) (string, bool) {
	if text[len(text)-1] != '\n' {
		return "", false
	}
	var c struct {
		ChunkID string `json:"chunk_id"`
	}
	if err := json.Unmarshal(text, &c); err != nil || c.ChunkID == "" {
		return "", false
	}
	return c.ChunkID, true
}
