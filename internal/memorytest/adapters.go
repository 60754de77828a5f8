package memorytest

import (
	"path/filepath"
	"testing"

	"github.com/ctxd/ctxd/coldstore"
	"github.com/ctxd/ctxd/index"
	"github.com/ctxd/ctxd/memory/boltstore"
)

// Adapters opens the store, the index and the cold mirror of a data dir in
// dir, for tests that build their own service or admin on them. Cleanup
// closes them and checks the store file (register anything that uses them
// later, so its cleanup runs first).
func Adapters(tb testing.TB, dir string) (*boltstore.Store, *index.Index, *coldstore.Store) {
	tb.Helper()
	st, err := boltstore.Open(filepath.Join(dir, "ctxd.db"), false)
	if err != nil {
		tb.Fatal(err)
	}
	idx, err := index.Open(filepath.Join(dir, "index"), index.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	cold, err := coldstore.Open(filepath.Join(dir, "cold"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		idx.Close()
		if err := st.Check(); err != nil {
			tb.Error(err)
		}
		st.Close()
	})
	return st, idx, cold
}
