package main

import (
	"path/filepath"

	"github.com/ctxd/ctxd/memory/boltstore"
)

func openStoreOnly(dir string) (*boltstore.Store, error) {
	return boltstore.Open(filepath.Join(dir, "ctxd.db"), false)
}
