package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Every single changed byte of a record, anywhere in it, fails its
// checksum or its format check: none decodes into another message.
func TestRecordChecksumCatchesEveryByte(t *testing.T) {
	m := &memory.Message{ID: "m1", SessionID: "s", Tenant: "t", Role: memory.RoleUser, Content: strings.Repeat("the okapi grazes ", 20),
		State: memory.StateActive, CreatedAt: time.Unix(1000, 0).UTC()}
	rec, err := encodeRecord(m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rec[0] != recordV2 {
		t.Fatalf("new records are version %d, want %d", rec[0], recordV2)
	}
	for i := range rec {
		for _, bit := range []byte{0x01, 0x80} {
			bad := bytes.Clone(rec)
			bad[i] ^= bit
			if got, err := decodeMessage(nil, nil, bad); err == nil {
				t.Fatalf("byte %d ^ %#x decoded as %+v", i, bit, got)
			}
		}
	}
	// A record of the format before checksums still reads.
	js, _ := json.Marshal(m)
	if got, err := decodeMessage(nil, nil, append([]byte{recordV1, 0}, js...)); err != nil || got.Content != m.Content {
		t.Fatalf("recordV1 record: %v, %v", got, err)
	}
}

// A damaged record is an error naming its session, seq and (when asked
// for by id) its message; the rest of the store reads, the scan reports it
// and goes on, and deleting its session removes it.
func TestDamagedRecordNamedAndSkipped(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, filepath.Join(t.TempDir(), "ctxd.db"))
	for _, id := range []string{"good", "bad"} {
		ms := []*memory.Message{
			{ID: id + "-1", Role: memory.RoleUser, Content: "first of " + id, State: memory.StateActive, CreatedAt: time.Unix(1000, 0).UTC()},
			{ID: id + "-2", Role: memory.RoleUser, Content: "second of " + id, State: memory.StateActive, CreatedAt: time.Unix(1001, 0).UTC()},
		}
		if _, err := s.Append(ctx, "t", id, newSess("t", id), ms); err != nil {
			t.Fatal(err)
		}
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketMessages)
		key := tx.Bucket(bucketIDs).Get([]byte("bad-2"))
		v := bytes.Clone(b.Get(key))
		v[len(v)-3] ^= 0x20 // one changed byte of its content
		return b.Put(bytes.Clone(key), v)
	})
	if err != nil {
		t.Fatal(err)
	}

	_, err = s.Messages(ctx, "t", "bad", memory.MessageQuery{})
	var d *memory.DamagedRecord
	if !errors.As(err, &d) || d.SessionID != "bad" || d.Seq != 2 || memory.ErrorCode(err) != memory.EDAMAGED {
		t.Fatalf("listing the damaged session: %v", err)
	}
	_, err = s.MessagesByID(ctx, "t", []string{"bad-2"}, false)
	if !errors.As(err, &d) || d.MessageID != "bad-2" || !strings.Contains(memory.ErrorMessage(err), "bad-2") {
		t.Fatalf("reading the damaged message by id: %v (%q)", err, memory.ErrorMessage(err))
	}
	if got, err := s.MessagesByID(ctx, "t", []string{"bad-1", "good-2"}, false); err != nil || len(got) != 2 {
		t.Fatalf("reading undamaged messages: %d, %v", len(got), err)
	}
	var seen []string
	var bad []*memory.DamagedRecord
	err = s.ScanMessages(ctx, func(m *memory.Message) error { seen = append(seen, m.ID); return nil },
		func(d *memory.DamagedRecord) { bad = append(bad, d) })
	if err != nil || len(seen) != 3 || len(bad) != 1 || bad[0].MessageID != "bad-2" || bad[0].SessionID != "bad" {
		t.Fatalf("scan: %v, seen %v, damaged %+v", err, seen, bad)
	}
	if err := s.ForEachMessage(ctx, func(*memory.Message) error { return nil }); memory.ErrorCode(err) != memory.EDAMAGED {
		t.Fatalf("ForEachMessage over a damaged record: %v", err)
	}
	if err := s.DeleteSession(ctx, "t", "bad"); err != nil {
		t.Fatalf("delete the damaged session: %v", err)
	}
	if n := countKeys(t, s, bucketIDs); n != 2 {
		t.Fatalf("%d ids left after the delete, want 2", n)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

// A vector record fails on any changed byte and names its message; one of
// version 2, written before vector checksums, still reads.
func TestVectorRecordChecksum(t *testing.T) {
	m := &memory.Message{ID: "m1", Tenant: "t", SessionID: "s", State: memory.StateActive, Role: memory.RoleUser,
		CreatedAt: time.Unix(1700000000, 0).UTC(), Vector: []float32{0.25, -0.5, 1}}
	rec := encodeVector(m)
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x04
		_, err := decodeVectorRecord("m1", bad)
		var d *memory.DamagedRecord
		if !errors.As(err, &d) || d.MessageID != "m1" {
			t.Fatalf("byte %d changed: %v", i, err)
		}
	}
	// versions 2 (float32s, no checksum) and 3 (float32s and a checksum)
	v2 := []byte{2, stateByte(m.State), roleByte(m.Role), 0}
	v2 = binary.BigEndian.AppendUint64(v2, uint64(m.CreatedAt.UnixNano()))
	v2 = append(binary.AppendUvarint(v2, 1), 't')
	v2 = append(binary.AppendUvarint(v2, 1), 's')
	for _, f := range m.Vector {
		v2 = binary.LittleEndian.AppendUint32(v2, math.Float32bits(f))
	}
	if got, err := decodeVectorRecord("m1", v2); err != nil || got.Vector[2] != 1 || got.SessionID != "s" {
		t.Fatalf("version 2 record: %+v, %v", got, err)
	}
	v3 := bytes.Clone(v2)
	v3[0] = 3
	v3 = binary.BigEndian.AppendUint32(v3, crc32.Checksum(v3, castagnoli))
	if got, err := decodeVectorRecord("m1", v3); err != nil || got.Vector[0] != 0.25 || got.SessionID != "s" {
		t.Fatalf("version 3 record: %+v, %v", got, err)
	}
	v3[len(v3)-5] ^= 1
	if _, err := decodeVectorRecord("m1", v3); memory.ErrorCode(err) != memory.EDAMAGED {
		t.Fatalf("a damaged version 3 record: %v", err)
	}
}

// A damaged vector record is skipped by the scan that loads vectors at
// start (the message then lacks one, which verify reports and --repair
// mends) and named when a read needs it.
func TestDamagedVectorSkippedAndNamed(t *testing.T) {
	ctx := context.Background()
	s := openInternal(t, filepath.Join(t.TempDir(), "ctxd.db"))
	ms := []*memory.Message{
		{ID: "v1", Role: memory.RoleUser, Content: "one", State: memory.StateActive, CreatedAt: time.Unix(1000, 0).UTC(), Vector: []float32{1, 0}},
		{ID: "v2", Role: memory.RoleUser, Content: "two", State: memory.StateActive, CreatedAt: time.Unix(1001, 0).UTC(), Vector: []float32{0, 1}},
	}
	if _, err := s.Append(ctx, "t", "s", newSess("t", "s"), ms); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketVectors)
		v := bytes.Clone(b.Get([]byte("v2")))
		v[len(v)-6] ^= 0x01
		return b.Put([]byte("v2"), v)
	})
	if err != nil {
		t.Fatal(err)
	}
	var loaded []string
	var skipped []string
	if err := s.ForEachVector(ctx, func(m *memory.Message) error { loaded = append(loaded, m.ID); return nil },
		func(d *memory.DamagedRecord) { skipped = append(skipped, d.MessageID) }); err != nil || len(loaded) != 1 || loaded[0] != "v1" || len(skipped) != 1 {
		t.Fatalf("vectors loaded: %v, %v", loaded, err)
	}
	_, err = s.MessagesByID(ctx, "t", []string{"v2"}, true)
	if memory.ErrorCode(err) != memory.EDAMAGED || !strings.Contains(memory.ErrorMessage(err), "v2") {
		t.Fatalf("reading the message with the damaged vector: %v", err)
	}
}

// A session record fails on any changed byte and names its session (its
// token total was served as is before it had a checksum); one written
// before, plain JSON, still reads.
func TestSessionRecordChecksum(t *testing.T) {
	sess := &memory.Session{Tenant: "t", ID: "s1", ContextWindow: 16000, Tokens: 1234, Counts: memory.Counts{Active: 7}}
	rec, err := encodeSession(sess)
	if err != nil {
		t.Fatal(err)
	}
	key := sessionKey("t", "s1")
	got, err := decodeSession(key, rec)
	if err != nil || got.Tokens != 1234 || got.Counts.Active != 7 {
		t.Fatalf("decoded %+v, %v", got, err)
	}
	for i := range rec {
		bad := bytes.Clone(rec)
		bad[i] ^= 0x02
		_, err := decodeSession(key, bad)
		var d *memory.DamagedRecord
		if !errors.As(err, &d) || d.SessionID != "s1" || d.Tenant != "t" || memory.ErrorCode(err) != memory.EDAMAGED {
			t.Fatalf("byte %d changed: %v", i, err)
		}
	}
	legacy, err := json.Marshal(sess)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := decodeSession(key, legacy); err != nil || got.Tokens != 1234 {
		t.Fatalf("a record without a checksum: %+v, %v", got, err)
	}
}
