package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Idempotency keys and client message ids: see memory/idempotency.go. Both
// live under the session's key prefix, so DeleteSession removes them with
// it. A store opened read-only on a data dir written before they existed
// has neither bucket: reads then find nothing.

const (
	writeRecordTag = 'k' // the record of a key
	writeTimeTag   = 't' // the same key by the time it was recorded
)

func clientIDKey(tenant, session, clientID string) []byte {
	return append(messagePrefix(tenant, session), clientID...)
}

func writeRecordKey(tenant, session, key string) []byte {
	return append(append(messagePrefix(tenant, session), writeRecordTag), key...)
}

func writeTimePrefix(tenant, session string) []byte {
	return append(messagePrefix(tenant, session), writeTimeTag)
}

func writeTimeKey(tenant, session string, at time.Time, key string) []byte {
	k := binary.BigEndian.AppendUint64(writeTimePrefix(tenant, session), uint64(at.UnixNano()))
	return append(k, key...)
}

func getWriteRecord(tx *bolt.Tx, tenant, session, key string) (*memory.WriteRecord, error) {
	b := tx.Bucket(bucketWrites)
	if b == nil {
		return nil, nil
	}
	v := b.Get(writeRecordKey(tenant, session, key))
	if v == nil {
		return nil, nil
	}
	var rec memory.WriteRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, fmt.Errorf("decode write record of session %s: %w", session, err)
	}
	return &rec, nil
}

// WriteKey returns the record of a session's write with an idempotency key.
func (s *Store) WriteKey(ctx context.Context, tenant, sessionID, key string) (*memory.WriteRecord, error) {
	var rec *memory.WriteRecord
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		rec, err = getWriteRecord(tx, tenant, sessionID, key)
		return err
	})
	return rec, err
}

// MessagesByClientID returns the session's messages with these client ids.
func (s *Store) MessagesByClientID(ctx context.Context, tenant, sessionID string, clientIDs []string) (map[string]*memory.Message, error) {
	out := map[string]*memory.Message{}
	err := s.view(func(tx *bolt.Tx) error {
		cb := tx.Bucket(bucketClient)
		if cb == nil {
			return nil
		}
		idb, msgs := tx.Bucket(bucketIDs), tx.Bucket(bucketMessages)
		for _, cid := range clientIDs {
			id := cb.Get(clientIDKey(tenant, sessionID, cid))
			if id == nil {
				continue
			}
			key := idb.Get(id)
			if key == nil {
				return fmt.Errorf("client id %q names message %s, which is not stored", cid, id)
			}
			m, err := s.decoded.decode(tx, key, msgs.Get(key))
			if err != nil {
				return err
			}
			out[cid] = m
		}
		return nil
	})
	return out, err
}

func (t *sessionTx) WriteKey(key string) (*memory.WriteRecord, error) {
	return getWriteRecord(t.tx, t.sess.Tenant, t.sess.ID, key)
}

// PutWriteKey records rec and prunes the session's records by age and
// number. The records sort by time under the session's prefix, so pruning
// reads at most keep+1 entries.
func (t *sessionTx) PutWriteKey(rec *memory.WriteRecord, expireBefore time.Time, keep int) error {
	tenant, session := t.sess.Tenant, t.sess.ID
	b := t.tx.Bucket(bucketWrites)
	prev, err := t.WriteKey(rec.Key)
	if err != nil {
		return err
	}
	if prev != nil {
		if err := b.Delete(writeTimeKey(tenant, session, prev.At, prev.Key)); err != nil {
			return fmt.Errorf("replace write record %q: %w", rec.Key, err)
		}
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode write record %q: %w", rec.Key, err)
	}
	if err := b.Put(writeRecordKey(tenant, session, rec.Key), v); err != nil {
		return fmt.Errorf("put write record %q: %w", rec.Key, err)
	}
	if err := b.Put(writeTimeKey(tenant, session, rec.At, rec.Key), nil); err != nil {
		return fmt.Errorf("put write record %q: %w", rec.Key, err)
	}
	return pruneWriteKeys(b, tenant, session, expireBefore, keep)
}

func pruneWriteKeys(b *bolt.Bucket, tenant, session string, expireBefore time.Time, keep int) error {
	prefix := writeTimePrefix(tenant, session)
	var times [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		times = append(times, bytes.Clone(k))
	}
	cut := max(len(times)-keep, 0) // the oldest beyond keep go
	for cut < len(times) && int64(binary.BigEndian.Uint64(times[cut][len(prefix):])) < expireBefore.UnixNano() {
		cut++
	}
	for _, k := range times[:cut] {
		key := string(k[len(prefix)+8:])
		if err := b.Delete(k); err != nil {
			return fmt.Errorf("forget write record %q: %w", key, err)
		}
		if err := b.Delete(writeRecordKey(tenant, session, key)); err != nil {
			return fmt.Errorf("forget write record %q: %w", key, err)
		}
	}
	return nil
}

func (t *sessionTx) MessageByClientID(clientID string) (*memory.Message, error) {
	id := t.tx.Bucket(bucketClient).Get(clientIDKey(t.sess.Tenant, t.sess.ID, clientID))
	if id == nil {
		return nil, nil
	}
	return t.Message(string(id))
}

// putClientID points the message's client id at it (old: the stored
// version, whose client id is dropped if it differs).
func putClientID(tx *bolt.Tx, m, old *memory.Message) error {
	b := tx.Bucket(bucketClient)
	if old != nil && old.ClientID != "" && old.ClientID != m.ClientID {
		if err := deleteClientID(tx, old); err != nil {
			return err
		}
	}
	if m.ClientID == "" {
		return nil
	}
	if err := b.Put(clientIDKey(m.Tenant, m.SessionID, m.ClientID), []byte(m.ID)); err != nil {
		return fmt.Errorf("put client id of %s: %w", m.ID, err)
	}
	return nil
}

// deleteClientID forgets m's client id, if it still names m.
func deleteClientID(tx *bolt.Tx, m *memory.Message) error {
	if m.ClientID == "" {
		return nil
	}
	b := tx.Bucket(bucketClient)
	k := clientIDKey(m.Tenant, m.SessionID, m.ClientID)
	if string(b.Get(k)) != m.ID {
		return nil
	}
	if err := b.Delete(k); err != nil {
		return fmt.Errorf("delete client id of %s: %w", m.ID, err)
	}
	return nil
}
