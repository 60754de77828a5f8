package index

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
)

func TestWatermarkPersists(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if wm, err := x.Watermark(); err != nil || wm != 0 {
		t.Fatalf("new index: watermark %d, %v", wm, err)
	}
	seed(t, x)
	mustApply(t, x, memory.IndexBatch{Watermark: 1 << 40})
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if wm, err := x.Watermark(); err != nil || wm != 1<<40 {
		t.Fatalf("reopened: watermark %d, %v", wm, err)
	}
	// The text side is on disk, the vector side must be loaded again.
	assertCount(t, x, 6, 0)
	if err := x.LoadVectors(context.Background(), []*memory.Message{msg("t1", "a", "a1", "", 0)}); err != nil {
		t.Fatal(err)
	}
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Text: "billing", Vector: topicVec(0), Highlight: true})
	if len(hits) == 0 || hits[0].ID != "a1" || hits[0].VectorScore == 0 || hits[0].TextScore == 0 {
		t.Fatalf("hits = %+v", hits)
	}
}

func TestResetVectors(t *testing.T) {
	x := openTest(t, Options{})
	seed(t, x)
	x.ResetVectors()
	assertCount(t, x, 6, 0)
	m := msg("t1", "a", "a1", "", 0)
	m.Vector = []float32{1, 0, 0} // a new model with another dimension
	if err := x.LoadVectors(context.Background(), []*memory.Message{m}); err != nil {
		t.Fatal(err)
	}
	hits := mustSearch(t, x, memory.SearchQuery{Tenant: "t1", Vector: []float32{1, 0, 0}, Mode: memory.ModeVector})
	if len(hits) != 1 || hits[0].ID != "a1" {
		t.Fatalf("hits = %+v", hits)
	}
	if err := x.LoadVectors(context.Background(), []*memory.Message{msg("t1", "a", "a2", "", 0)}); err == nil {
		t.Fatal("a vector of another dimension was accepted")
	}
}

func TestOpenCorrupt(t *testing.T) {
	t.Run("BadMeta", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "idx")
		x, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, x)
		_ = x.Close()
		if err := os.WriteFile(filepath.Join(dir, "index_meta.json"), []byte("{garbage"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = Open(dir, Options{})
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("err = %v, want ErrCorrupt naming the dir", err)
		}
		if err := Remove(dir); err != nil {
			t.Fatal(err)
		}
		x, err = Open(dir, Options{})
		if err != nil {
			t.Fatalf("after Remove: %v", err)
		}
		_ = x.Close()
	})
	t.Run("BadRoot", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "idx")
		x, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, x)
		_ = x.Close()
		root := filepath.Join(dir, "store", "root.bolt")
		if err := os.WriteFile(root, []byte("not a bolt file at all, just junk bytes"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err = Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want ErrCorrupt", err)
		}
	})
	t.Run("EveryFileScribbled", func(t *testing.T) {
		dir := corruptIndex(t, func(path string) error { return os.WriteFile(path, []byte("garbage"), 0o600) })
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want ErrCorrupt", err)
		}
	})
	t.Run("SegmentsTruncated", func(t *testing.T) {
		dir := corruptIndex(t, func(path string) error {
			if filepath.Ext(path) != ".zap" {
				return nil
			}
			return os.Truncate(path, 100)
		})
		x, err := Open(dir, Options{})
		if err == nil {
			// Bleve skips a snapshot it cannot load and opens an older one:
			// acceptable only because the watermark goes back with the
			// documents, so the caller replays from there.
			wm, werr := x.Watermark()
			_ = x.Close()
			if werr != nil || wm >= 6 {
				t.Fatalf("truncated segments went unnoticed: watermark %d, %v", wm, werr)
			}
			return
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want ErrCorrupt", err)
		}
	})
	t.Run("OtherSchema", func(t *testing.T) {
		// An index written with an earlier mapping (version 1 stored term
		// vectors) is reported for a rebuild, not searched as it is.
		dir := filepath.Join(t.TempDir(), "idx")
		x, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		seed(t, x)
		if err := x.text.SetInternal(schemaKey, []byte("1")); err != nil {
			t.Fatal(err)
		}
		_ = x.Close()
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrSchema) || !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), `schema "1"`) {
			t.Fatalf("err = %v, want ErrSchema (an ErrCorrupt) for schema 1", err)
		}
	})
	t.Run("NotAnIndex", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want ErrCorrupt", err)
		}
	})
	t.Run("InUse", func(t *testing.T) {
		old := lockTimeout
		lockTimeout = 100 * time.Millisecond
		t.Cleanup(func() { lockTimeout = old })
		dir := filepath.Join(t.TempDir(), "idx")
		x, err := Open(dir, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		_, err = Open(dir, Options{})
		if err == nil || errors.Is(err, ErrCorrupt) {
			t.Fatalf("err = %v, want an in-use error that is not ErrCorrupt", err)
		}
	})
	t.Run("EmptyDirIsNew", func(t *testing.T) {
		x, err := Open(t.TempDir(), Options{})
		if err != nil {
			t.Fatal(err)
		}
		_ = x.Close()
	})
	t.Run("BadOptions", func(t *testing.T) {
		if _, err := Open(t.TempDir(), Options{Fusion: "max"}); err == nil {
			t.Fatal("bad fusion accepted")
		}
	})
}

// corruptIndex builds a small index, closes it and applies damage to every file.
func corruptIndex(t *testing.T, damage func(path string) error) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	seed(t, x)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return damage(path)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestClosed(t *testing.T) {
	x, err := Open(filepath.Join(t.TempDir(), "idx"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = x.Close()
	if err := x.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := x.Search(context.Background(), memory.SearchQuery{Tenant: "t", Text: "x"}); err == nil {
		t.Error("Search after Close succeeded")
	}
	if err := x.Apply(context.Background(), memory.IndexBatch{}); err == nil {
		t.Error("Apply after Close succeeded")
	}
}

// Batches return before they are on disk (unsafe_batch); Close writes them
// out, so a clean shutdown reopens at the last watermark with every
// document, and needs no catch-up.
func TestCloseKeepsEveryBatch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "idx")
	x, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		mustApply(t, x, memory.IndexBatch{Upserts: []*memory.Message{msg("t", "s", fmt.Sprintf("m%02d", i), fmt.Sprintf("note number %d about walruses", i), 0)},
			Watermark: uint64(i + 1)})
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x, err = Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if wm, err := x.Watermark(); err != nil || wm != 40 {
		t.Fatalf("watermark after reopen = %d, %v; want 40", wm, err)
	}
	n, err := x.text.DocCount()
	if err != nil || n != 40 {
		t.Fatalf("%d documents after reopen, %v; want 40", n, err)
	}
}
