package boltstore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// ForEachVector reads a few records a transaction and goes on from the
// last one: every record is visited once, in key order, across chunk
// boundaries and past a damaged record.
func TestForEachVectorChunks(t *testing.T) {
	s := openInternal(t, filepath.Join(t.TempDir(), "ctxd.db"))
	var want []string
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVectors)
		for i := range 7 {
			id := fmt.Sprintf("m%d", i)
			rec := encodeVector(&memory.Message{ID: id, Tenant: "t", SessionID: "s", State: memory.StateActive,
				Role: memory.RoleUser, CreatedAt: time.Unix(int64(i), 0), Vector: []float32{1, float32(i)}})
			if i == 3 {
				rec = []byte{9, 9, 9} // damaged
			} else {
				want = append(want, id)
			}
			if err := b.Put([]byte(id), rec); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func(n int) { vectorChunk = n }(vectorChunk)
	for _, chunk := range []int{1, 2, 3, 7, 100} {
		vectorChunk = chunk
		var got, damaged []string
		err := s.ForEachVector(context.Background(), func(m *memory.Message) error {
			got = append(got, m.ID)
			return nil
		}, func(d *memory.DamagedRecord) { damaged = append(damaged, d.MessageID) })
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) || !slices.Equal(damaged, []string{"m3"}) {
			t.Fatalf("chunks of %d: visited %v and damaged %v, want %v and [m3]", chunk, got, damaged, want)
		}
	}
}
