package boltstore

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// DropBucketsForTest removes buckets from a closed store file, to make a
// file as an older ctxd wrote it.
func DropBucketsForTest(path string, names ...string) error {
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	return db.Update(func(tx *bolt.Tx) error {
		for _, n := range names {
			if err := tx.DeleteBucket([]byte(n)); err != nil {
				return fmt.Errorf("drop bucket %s: %w", n, err)
			}
		}
		return nil
	})
}
