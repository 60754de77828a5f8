package boltstore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/boltstore"
)

// Write records are kept per session, pruned by age and by number in the
// transaction that adds one, and leave with their session; client ids
// name their message until it is deleted.
func TestWriteKeysAndClientIDs(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ctxd.db")
	s := mustOpen(t, path)
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	put := func(session, key string, at time.Time, keep int) {
		t.Helper()
		if _, err := s.Write(ctx, "t", session, newSession("t", session), func(tx memory.SessionTx) error {
			return tx.PutWriteKey(&memory.WriteRecord{Key: key, Hash: "h-" + key, IDs: []string{key + "-id"}, Tokens: []int{1}, At: at},
				at.Add(-time.Hour), keep)
		}); err != nil {
			t.Fatal(err)
		}
	}
	kept := func(session string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			rec, err := s.WriteKey(ctx, "t", session, k)
			if err != nil || rec == nil || rec.Hash != "h-"+k || rec.IDs[0] != k+"-id" {
				t.Fatalf("record %s/%s = %+v, %v", session, k, rec, err)
			}
		}
	}
	gone := func(session string, keys ...string) {
		t.Helper()
		for _, k := range keys {
			if rec, err := s.WriteKey(ctx, "t", session, k); err != nil || rec != nil {
				t.Fatalf("record %s/%s should be gone: %+v, %v", session, k, rec, err)
			}
		}
	}
	for i := range 5 {
		put("a", fmt.Sprint("k", i), t0.Add(time.Duration(i)*time.Minute), 3)
	}
	kept("a", "k2", "k3", "k4")
	gone("a", "k0", "k1")
	put("b", "k0", t0, 3) // another session: its own keys
	kept("b", "k0")
	// Re-recording a key replaces it (and its place in time).
	put("a", "k2", t0.Add(10*time.Minute), 3)
	put("a", "k5", t0.Add(11*time.Minute), 3)
	kept("a", "k2", "k4", "k5")
	gone("a", "k3")
	// Past an hour (this test's TTL) the older ones go whatever their number.
	put("a", "k6", t0.Add(70*time.Minute), 3)
	kept("a", "k6", "k2", "k5")
	put("a", "k7", t0.Add(80*time.Minute), 3)
	kept("a", "k6", "k7")
	gone("a", "k2", "k4", "k5")

	// Client ids.
	m := &memory.Message{ID: "m1", Role: memory.RoleUser, Content: "hi", Tokens: 5, State: memory.StateActive,
		CreatedAt: t0, ClientID: "turn-1", Vector: []float32{1, 0}}
	if _, err := s.Append(ctx, "t", "a", newSession("t", "a"), []*memory.Message{m}); err != nil {
		t.Fatal(err)
	}
	found, err := s.MessagesByClientID(ctx, "t", "a", []string{"turn-1", "turn-2"})
	if err != nil || len(found) != 1 || found["turn-1"].ID != "m1" {
		t.Fatalf("by client id = %v, %v", found, err)
	}
	if found, _ := s.MessagesByClientID(ctx, "t", "b", []string{"turn-1"}); len(found) != 0 {
		t.Fatalf("client id seen from another session: %v", found)
	}
	if _, err := s.Update(ctx, "t", "a", func(tx memory.SessionTx) error { return tx.Delete("m1") }); err != nil {
		t.Fatal(err)
	}
	if found, _ := s.MessagesByClientID(ctx, "t", "a", []string{"turn-1"}); len(found) != 0 {
		t.Fatalf("client id of a deleted message: %v", found)
	}

	// A deleted session takes its keys and ids along.
	if err := s.DeleteSession(ctx, "t", "a"); err != nil {
		t.Fatal(err)
	}
	gone("a", "k6", "k7")
	kept("b", "k0")

	// A store opened read-only on a file from before these buckets existed
	// finds nothing, and fails nothing.
	old := filepath.Join(t.TempDir(), "old.db")
	o, err := boltstore.Open(old, false)
	if err != nil {
		t.Fatal(err)
	}
	o.Close()
	if err := boltstore.DropBucketsForTest(old, "clientids", "writekeys"); err != nil {
		t.Fatal(err)
	}
	ro, err := boltstore.Open(old, true)
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if rec, err := ro.WriteKey(ctx, "t", "a", "k"); rec != nil || err != nil {
		t.Fatalf("read-only, old file: %v %v", rec, err)
	}
	if found, err := ro.MessagesByClientID(ctx, "t", "a", []string{"x"}); len(found) != 0 || err != nil {
		t.Fatalf("read-only, old file: %v %v", found, err)
	}
}
