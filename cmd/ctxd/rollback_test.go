package main

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/server"
)

// zeroNewestMeta zeroes the newer of a stopped store's two bbolt meta
// pages, as a torn or lost last page write leaves it: bbolt then opens the
// file at the older one, without a word, one transaction back.
func zeroNewestMeta(t *testing.T, path string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// A meta page: a 16-byte page header, then magic, version, page size
	// and flags (4 bytes each), the root bucket (16), the freelist and
	// high-water page ids (8 each), then the transaction id.
	head := make([]byte, 128)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	pageSize := int64(binary.LittleEndian.Uint32(head[24:28]))
	txid := func(page int64) uint64 {
		b := make([]byte, 8)
		if _, err := f.ReadAt(b, page*pageSize+64); err != nil {
			t.Fatal(err)
		}
		return binary.LittleEndian.Uint64(b)
	}
	newest := int64(0)
	if txid(1) > txid(0) {
		newest = 1
	}
	if _, err := f.WriteAt(make([]byte, pageSize), newest*pageSize); err != nil {
		t.Fatal(err)
	}
}

// A store that lost its newest write (its newest bbolt meta page zeroed:
// bbolt opens it one transaction back, silently) next to an index that
// holds that write: start refuses and says the store was rolled back,
// rather than rebuilding the index from it and serving it as whole (verify
// was then clean); verify names the message lost; --allow-store-rollback
// starts on the store as it is, keeping the old index aside.
func TestStoreRollbackRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.store("s", msg("user", "the penguins march at noon"))
	lost := ts.store("s", msg("user", "the walrus swims at dawn"))[0]
	ts.Stop()
	zeroNewestMeta(t, server.StorePath(dir))

	b, err := runBinary(t, dir)
	if err == nil {
		b.Stop(t)
		t.Fatal("ctxd serve started on a store that lost its last acknowledged write")
	}
	for _, want := range []string{"store was rolled back", "--allow-store-rollback", "ctxd verify"} {
		if !strings.Contains(b.Log(), want) {
			t.Errorf("refusal lacks %q:\n%s", want, b.Log())
		}
	}
	out, errOut, code := runBinaryCmd(t, "verify", "--data-dir", dir)
	if code == 0 || !strings.Contains(out, "index_ahead") || !strings.Contains(out, lost) {
		t.Fatalf("verify on the rolled-back store exited %d, want index_ahead and the lost message %s named:\n%s%s", code, lost, out, errOut)
	}

	b = mustRunBinary(t, dir, "--allow-store-rollback")
	c := b.client(t, dir)
	c.mustDo(200, "GET", "/readyz", nil)
	if got := c.search(map[string]any{"query": "penguins", "mode": "text"}); len(got) != 1 {
		t.Errorf("search after starting on the rolled-back store: %v", got)
	}
	b.Stop(t)
	if aside, _ := filepath.Glob(server.IndexPath(dir) + ".broken-*"); len(aside) != 1 {
		t.Errorf("the index ahead of the store was not kept aside: %v", aside)
	}
}

// An index path that is a regular file is an unusable index: verify
// reports index_unusable (it failed outright, reading it as a directory)
// and verify --repair rebuilds it.
func TestVerifyIndexPathIsAFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, dir)
	ts.store("s", msg("user", "the penguins march at noon"))
	ts.Stop()
	if err := os.RemoveAll(server.IndexPath(dir)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, server.IndexPath(dir), "not an index")
	out, errOut, code := runBinaryCmd(t, "verify", "--data-dir", dir)
	if code != 1 || !strings.Contains(out, "index_unusable") {
		t.Fatalf("verify with a file for the index exited %d, want 1 and index_unusable:\n%s%s", code, out, errOut)
	}
	if out, errOut, code := runBinaryCmd(t, "verify", "--repair", "--data-dir", dir); code != 0 {
		t.Fatalf("verify --repair exited %d:\n%s%s", code, out, errOut)
	}
	mustConsistent(t, dir, "after verify --repair rebuilt the index")
}
