//go:build !linux

package boltstore

import bolt "go.etcd.io/bbolt"

// releaseMapped does nothing here: see release_linux.go.
func releaseMapped(*bolt.DB, *bolt.Tx) {}
