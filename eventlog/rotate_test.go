package eventlog

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Rotated files are gzipped. Plain rotated files an earlier version left
// are read in their place and rotated on; a generation a crash left both
// plain and compressed is read once (its .gz); a compression's temporary
// file is removed at Open.
func TestRotatedFilesCompressedAndPlainRead(t *testing.T) {
	dir := t.TempDir()
	line := func(i int) string { return fmt.Sprintf(`{"i":%d,"time":"2025-01-02T02:04:05Z"}`+"\n", i) }
	// As an earlier version left them: recoveries.2.jsonl, .1.jsonl plain.
	os.WriteFile(filepath.Join(dir, "recoveries.2.jsonl"), []byte(line(0)+line(1)), 0o600)
	os.WriteFile(filepath.Join(dir, "recoveries.1.jsonl"), []byte(line(2)+line(3)), 0o600)
	os.WriteFile(filepath.Join(dir, "recoveries.1.jsonl.gz.tmp"), []byte("half"), 0o600)
	l := open(t, dir, Options{MaxBytes: 100, MaxFiles: 3})
	if _, err := os.Stat(filepath.Join(dir, "recoveries.1.jsonl.gz.tmp")); !os.IsNotExist(err) {
		t.Fatalf("Open left a compression's temporary file: %v", err)
	}
	ids := func() []int64 {
		t.Helper()
		all, err := l.Tail(StreamRecoveries, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, e := range all {
			i, _ := e["i"].(json.Number).Int64()
			out = append(out, i)
		}
		return out
	}
	if got := fmt.Sprint(ids()); got != "[0 1 2 3]" {
		t.Fatalf("Tail over plain rotated files = %v", got)
	}
	for i := 4; i < 10; i++ {
		if err := l.Log(StreamRecoveries, map[string]any{"i": i}); err != nil {
			t.Fatal(err)
		}
	}
	// 6 events of ~50 bytes in 100-byte files: two rotations; the plain
	// files moved on (the oldest past MaxFiles), the compressed ones after.
	if got := fmt.Sprint(ids()); got != "[2 3 4 5 6 7 8 9]" {
		t.Fatalf("Tail after rotations = %v", got)
	}
	for _, name := range []string{"recoveries.1.jsonl.gz", "recoveries.2.jsonl.gz", "recoveries.3.jsonl"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if got := len(readLines(t, filepath.Join(dir, "recoveries.1.jsonl.gz"))); got != 2 {
		t.Fatalf("recoveries.1.jsonl.gz holds %d events, want 2", got)
	}

	// A crash after the compressed file was renamed into place, before
	// the plain one went: both hold the same events, read once.
	plain := plainText(t, filepath.Join(dir, "recoveries.1.jsonl.gz"))
	os.WriteFile(filepath.Join(dir, "recoveries.1.jsonl"), plain, 0o600)
	if got := fmt.Sprint(ids()); got != "[2 3 4 5 6 7 8 9]" {
		t.Fatalf("Tail with a generation both plain and compressed = %v", got)
	}
}
