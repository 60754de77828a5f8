package coldstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A flipped byte in one segment loses that segment's lines, says so, and
// leaves the segments after it readable; bytes that are no segment at all
// are said too; Rewrite (verify's repair) makes the file whole again.
func TestDamagedSegment(t *testing.T) {
	s := openStore(t)
	for _, id := range []string{"1", "2", "3"} {
		if err := s.Append("t", "s", chunks("t", "s", id+"a", id+"b")); err != nil {
			t.Fatal(err)
		}
	}
	_, path, _ := s.paths("t", "s")
	raw, _ := os.ReadFile(path)
	sc := scanSegments(raw)
	if len(sc.segs) != 3 {
		t.Fatalf("3 appends made %d segments", len(sc.segs))
	}
	second := raw[sc.segs[0].end:sc.segs[1].end]
	raw[sc.segs[0].end+len(second)/2] ^= 0x40
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := s.Read("t", "s")
	var dmg *DamageError
	if !errors.As(err, &dmg) || dmg.BadSegments != 1 || dmg.BadBytes != len(second) || dmg.TornBytes != 0 {
		t.Fatalf("Read(flipped byte) error = %v (%+v), want one damaged segment of %d bytes", err, dmg, len(second))
	}
	equalChunks(t, got, append(chunks("t", "s", "1a", "1b"), chunks("t", "s", "3a", "3b")...))

	// An Append after the damage is still read; the damage is still said.
	if err := s.Append("t", "s", chunks("t", "s", "4a")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read("t", "s"); !errors.As(err, &dmg) || dmg.BadSegments != 1 || len(got) != 5 || got[4].ChunkID != "4a" {
		t.Fatalf("Read after append = %d chunks, %v", len(got), err)
	}

	// Bytes that are no segment (typed into the file by hand).
	writeRaw(t, path, "}}garbage{{\n")
	if got, err = s.Read("t", "s"); !errors.As(err, &dmg) || dmg.BadSegments != 2 || len(got) != 5 {
		t.Fatalf("Read(garbage) = %d chunks, %v", len(got), err)
	}

	if err := s.Rewrite("t", "s", got); err != nil {
		t.Fatal(err)
	}
	if again, err := s.Read("t", "s"); err != nil || len(again) != 5 {
		t.Fatalf("after repair: %d chunks, %v", len(again), err)
	}
}

// A plain JSONL file of an earlier version reads as it is when the store is
// opened read-only (verify), and Open turns it into a segment file with the
// same lines (a torn last line, never acknowledged, left out) that later
// Appends extend.
func TestOpenUpgradesPlainFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cold")
	if err := os.MkdirAll(filepath.Join(dir, "t"), 0o700); err != nil {
		t.Fatal(err)
	}
	text, err := encode("t", "s:1", chunks("t", "s:1", "1", "2"))
	if err != nil {
		t.Fatal(err)
	}
	legacy := filepath.Join(dir, "t", "s%3A1.jsonl")
	if err := os.WriteFile(legacy, append(bytes.Clone(text), `{"chunk_id":"3"`...), 0o600); err != nil {
		t.Fatal(err)
	}

	ro, err := OpenReadOnly(dir)
	if err != nil {
		t.Fatal(err)
	}
	refs, _ := ro.Sessions()
	got, err := ro.Read("t", "s:1")
	var dmg *DamageError
	if len(refs) != 1 || refs[0] != (SessionRef{"t", "s:1"}) || len(got) != 2 || !errors.As(err, &dmg) || dmg.TornBytes != len(`{"chunk_id":"3"`) {
		t.Fatalf("read-only: sessions %v, %d chunks, %v", refs, len(got), err)
	}
	if _, err := os.Stat(legacy); err != nil {
		t.Fatalf("a read-only open changed the file: %v", err)
	}

	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("plain file still there after Open: %v", err)
	}
	_, path, _ := s.paths("t", "s:1")
	if !bytes.Equal(plainText(t, path), text) {
		t.Fatalf("upgraded file reads\n%s\nwant\n%s", plainText(t, path), text)
	}
	if err := s.Append("t", "s:1", chunks("t", "s:1", "4")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read("t", "s:1"); err != nil || len(got) != 3 {
		t.Fatalf("after upgrade and append: %d chunks, %v", len(got), err)
	}

	// A crash between the new file's rename and the old one's removal
	// leaves both: listed once, and the next Open finishes the upgrade.
	if err := os.WriteFile(legacy, text, 0o600); err != nil {
		t.Fatal(err)
	}
	if refs, _ := s.Sessions(); len(refs) != 1 {
		t.Fatalf("both files listed as %v", refs)
	}
	if _, err := Open(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Read("t", "s:1"); err != nil || len(got) != 2 {
		t.Fatalf("after a second upgrade: %d chunks, %v", len(got), err)
	}
}
