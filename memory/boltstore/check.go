package boltstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// maxCheckErrors bounds what Check reports: a damaged page can make bbolt
// report every page under it.
const maxCheckErrors = 20

// Check runs bbolt's consistency check (every page reachable once, none
// both free and in use) and checks that every kept-apart prompt is counted
// by exactly the records that name it. It returns the problems found, up
// to maxCheckErrors of them, joined; a damaged page is one of them, not a
// panic.
func (s *Store) Check() error {
	var errs []error
	err := s.view(func(tx *bolt.Tx) error {
		// Drain the channel: bbolt's checker runs in its own goroutine on
		// this transaction and must finish before it ends.
		for err := range tx.Check() {
			if len(errs) < maxCheckErrors {
				errs = append(errs, fmt.Errorf("store check: %w", err))
			}
		}
		if len(errs) > 0 {
			return nil // the prompts check would walk the same damaged pages
		}
		if err := checkPrompts(tx); err != nil {
			errs = append(errs, fmt.Errorf("store check: %w", err))
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

var _ memory.DamageScanner = (*Store)(nil)

// ScanMessages is ForEachMessage that hands each record that fails its
// checksum or does not decode to damaged, with the id the ids bucket gives
// it, and goes on with the next one.
func (s *Store) ScanMessages(ctx context.Context, fn func(*memory.Message) error, damaged func(*memory.DamagedRecord)) error {
	return s.view(func(tx *bolt.Tx) error {
		vecs := tx.Bucket(bucketVectors)
		bad := map[string]*memory.DamagedRecord{}
		err := tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			m, err := decodeMessage(tx, k, v)
			var d *memory.DamagedRecord
			if errors.As(err, &d) {
				bad[string(k)] = d
				return nil
			}
			if err != nil {
				return err
			}
			if vb := vecs.Get([]byte(m.ID)); vb != nil {
				if m.Vector, err = decodeVector(m.ID, vb); err != nil {
					return err
				}
			}
			return fn(m)
		})
		if err != nil || len(bad) == 0 {
			return err
		}
		// Which message a damaged record was: one scan of the ids, only
		// when something is damaged.
		err = tx.Bucket(bucketIDs).ForEach(func(id, key []byte) error {
			if d := bad[string(key)]; d != nil {
				d.MessageID = string(id)
			}
			return nil
		})
		for _, k := range slices.Sorted(maps.Keys(bad)) {
			damaged(bad[k])
		}
		return err
	})
}
