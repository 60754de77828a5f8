package boltstore

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/storetest"
	bolt "go.etcd.io/bbolt"
)

// TestContract runs the rules every memory.Store keeps (memory/storetest)
// against bbolt.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) memory.Store { return openInternal(t, filepath.Join(t.TempDir(), "ctxd.db")) },
		Damage: func(t *testing.T, st memory.Store, tenant, session, id string) {
			err := st.(*Store).db.Update(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketMessages)
				key := bytes.Clone(tx.Bucket(bucketIDs).Get([]byte(id)))
				v := bytes.Clone(b.Get(key))
				v[len(v)-3] ^= 0x20
				return b.Put(key, v)
			})
			if err != nil {
				t.Fatal(err)
			}
		},
	})
}
