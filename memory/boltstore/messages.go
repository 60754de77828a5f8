package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Append stores msgs at the end of a session in one transaction; bbolt fsyncs
// on commit, so a nil return means the messages are on disk.
func (s *Store) Append(ctx context.Context, tenant, id string, create func() *memory.Session, msgs []*memory.Message) (*memory.Session, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	if err := s.checkFree(); err != nil {
		return nil, err
	}
	var sess *memory.Session
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		if sess, err = getOrCreateSession(tx, tenant, id, create); err != nil {
			return err
		}
		for _, m := range msgs {
			sess.Place(m)
			if err := putMessage(tx, m, nil); err != nil {
				return err
			}
			sess.Account(m, +1)
		}
		if n := len(msgs); n > 0 && msgs[n-1].CreatedAt.After(sess.UpdatedAt) {
			sess.UpdatedAt = msgs[n-1].CreatedAt
		}
		return putSession(tx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// putMessage writes a message record, its id, state entry and vector, and
// logs the change. old is the stored version (nil for a new message, whose
// id must not exist yet).
func putMessage(tx *bolt.Tx, m, old *memory.Message) error {
	ids, states := tx.Bucket(bucketIDs), tx.Bucket(bucketStates)
	key := messageKey(m.Tenant, m.SessionID, m.Seq)
	if old == nil && ids.Get([]byte(m.ID)) != nil {
		return memory.Errorf(memory.ECONFLICT, "message id %s exists already", m.ID)
	}
	if old != nil {
		if err := states.Delete(stateKey(old)); err != nil {
			return fmt.Errorf("delete state entry %s: %w", m.ID, err)
		}
	}
	if err := states.Put(stateKey(m), nil); err != nil {
		return fmt.Errorf("put state entry %s: %w", m.ID, err)
	}
	// Acquire the new prompt before releasing the old: the same prompt
	// then never drops to no reference on the way.
	ref, err := promptAcquire(tx, m)
	if err != nil {
		return err
	}
	b, err := encodeRecord(m, ref)
	if err != nil {
		return err
	}
	msgs := tx.Bucket(bucketMessages)
	if old != nil {
		if err := promptRelease(tx, m.Tenant, m.SessionID, msgs.Get(key)); err != nil {
			return fmt.Errorf("put message %s: %w", m.ID, err)
		}
	}
	if err := msgs.Put(key, b); err != nil {
		return fmt.Errorf("put message %s: %w", m.ID, err)
	}
	if err := ids.Put([]byte(m.ID), key); err != nil {
		return fmt.Errorf("put id %s: %w", m.ID, err)
	}
	if err := putClientID(tx, m, old); err != nil {
		return err
	}
	if m.Vector != nil {
		if err := tx.Bucket(bucketVectors).Put([]byte(m.ID), encodeVector(m)); err != nil {
			return fmt.Errorf("put vector %s: %w", m.ID, err)
		}
	}
	return logChange(tx, memory.Change{Op: memory.ChangeUpsert, Tenant: m.Tenant, SessionID: m.SessionID, MessageID: m.ID})
}

// Messages lists a session's messages in order.
func (s *Store) Messages(ctx context.Context, tenant, sessionID string, q memory.MessageQuery) ([]*memory.Message, error) {
	var out []*memory.Message
	err := s.view(func(tx *bolt.Tx) error {
		if err := sessionExists(tx, tenant, sessionID); err != nil {
			return err
		}
		var err error
		out, err = listMessages(tx, tenant, sessionID, q, q.Vectors, s.decoded.decoder(tx))
		return err
	})
	return out, err
}

// seekBefore positions c on the last key under prefix whose seq (the 8
// bytes after prefix) is below before (0: no bound).
func seekBefore(c *bolt.Cursor, prefix []byte, before uint64) ([]byte, []byte) {
	if before == 0 {
		before = math.MaxUint64 // no seq reaches it
	}
	if k, _ := c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), before)); k == nil {
		return c.Last()
	}
	return c.Prev()
}

// listMessages scans a session in seq order (newest first with q.Desc), decoding records with decode
// (given each record's key and bytes). With a state filter it walks the
// state index and reads only the matching records.
func listMessages(tx *bolt.Tx, tenant, sessionID string, q memory.MessageQuery, withVectors bool, decode recordDecoder) ([]*memory.Message, error) {
	msgs, vecs := tx.Bucket(bucketMessages), tx.Bucket(bucketVectors)
	var out []*memory.Message
	add := func(k, v []byte) (bool, error) {
		m, err := decode(k, v)
		if err != nil {
			return false, err
		}
		if withVectors {
			if vb := vecs.Get([]byte(m.ID)); vb != nil {
				if m.Vector, err = decodeVector(m.ID, vb); err != nil {
					return false, err
				}
			}
		}
		out = append(out, m)
		return q.Limit > 0 && len(out) == q.Limit, nil
	}
	if len(q.States) == 0 {
		prefix := messagePrefix(tenant, sessionID)
		c := msgs.Cursor()
		if q.Desc {
			for k, v := seekBefore(c, prefix, q.BeforeSeq); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
				if binary.BigEndian.Uint64(k[len(prefix):]) <= q.AfterSeq {
					break
				}
				if done, err := add(k, v); err != nil || done {
					return out, err
				}
			}
			return out, nil
		}
		for k, v := c.Seek(messageKey(tenant, sessionID, q.AfterSeq+1)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if done, err := add(k, v); err != nil || done {
				return out, err
			}
		}
		return out, nil
	}
	var seqs []uint64
	for _, st := range q.States {
		prefix := append(messagePrefix(tenant, sessionID), stateByte(st))
		c := tx.Bucket(bucketStates).Cursor()
		n := 0
		k, _ := c.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), q.AfterSeq+1))
		next := func() ([]byte, []byte) { return c.Next() }
		if q.Desc {
			k, _ = seekBefore(c, prefix, q.BeforeSeq)
			next = func() ([]byte, []byte) { return c.Prev() }
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = next() {
			seq := binary.BigEndian.Uint64(k[len(prefix):])
			if seq <= q.AfterSeq {
				break // only when Desc: ascending scans start past AfterSeq
			}
			seqs = append(seqs, seq)
			if n++; q.Limit > 0 && n == q.Limit {
				break
			}
		}
	}
	slices.Sort(seqs)
	if q.Desc {
		slices.Reverse(seqs)
	}
	for _, seq := range seqs {
		k := messageKey(tenant, sessionID, seq)
		v := msgs.Get(k)
		if v == nil {
			return nil, fmt.Errorf("state index names missing message %s/%d", sessionID, seq)
		}
		if done, err := add(k, v); err != nil || done {
			return out, err
		}
	}
	return out, nil
}

// MessagesByID returns the tenant's messages with these ids, skipping
// missing ones and other tenants' (a wrong tenant looks like a missing id).
func (s *Store) MessagesByID(ctx context.Context, tenant string, ids []string, withVectors bool) ([]*memory.Message, error) {
	out := make([]*memory.Message, 0, len(ids))
	tenantPrefix := append([]byte(tenant), 0)
	err := s.view(func(tx *bolt.Tx) error {
		idb, msgs, vecs := tx.Bucket(bucketIDs), tx.Bucket(bucketMessages), tx.Bucket(bucketVectors)
		for _, id := range ids {
			key := idb.Get([]byte(id))
			if key == nil || !bytes.HasPrefix(key, tenantPrefix) {
				continue
			}
			v := msgs.Get(key)
			if v == nil {
				return fmt.Errorf("message %s: id entry without record", id)
			}
			m, err := s.decoded.decode(tx, key, v)
			if err != nil {
				return withID(err, id)
			}
			if withVectors {
				if vb := vecs.Get([]byte(id)); vb != nil {
					v, err := decodeVector(m.ID, vb)
					if err != nil {
						return err
					}
					m.Vector = v
				}
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// Changes returns change-log entries after a seq.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]memory.Change, error) {
	var out []memory.Change
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketChanges).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			var ch memory.Change
			if err := json.Unmarshal(v, &ch); err != nil {
				return fmt.Errorf("decode change %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, ch)
			if limit > 0 && len(out) == limit {
				break
			}
		}
		return nil
	})
	return out, err
}

// LastSeq is the newest change's seq (the bucket's sequence survives trims).
func (s *Store) LastSeq(ctx context.Context) (uint64, error) {
	var seq uint64
	err := s.view(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		return nil
	})
	return seq, err
}

// TrimChanges deletes change-log entries up to a seq.
func (s *Store) TrimChanges(ctx context.Context, upTo uint64) error {
	return s.update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketChanges)
		var keys [][]byte
		c := b.Cursor()
		for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) <= upTo; k, _ = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
		}
		for _, k := range keys {
			if err := b.Delete(k); err != nil {
				return fmt.Errorf("trim change: %w", err)
			}
		}
		return nil
	})
}

// ForEachVector calls fn for every message with a vector, with the fields
// the vector index needs (no content), read from the vector records alone.
// A damaged vector record is skipped and given to damaged: see below.
//
// It reads vectorChunk records a read transaction: the server loads its
// vectors this way while it serves, and one transaction over a million
// records held off every write that had to grow the file (bbolt remaps
// only once no read transaction is open) for as long as the load took. So
// the visit is not one snapshot: a record written meanwhile may or may not
// be visited (the index's load gives way to writes; see index.vectorLoad).
// After each transaction the pages it read leave the process's resident
// memory (releaseMapped): the load reads every vector once, and its pages
// are not the working set.
func (s *Store) ForEachVector(ctx context.Context, fn func(*memory.Message) error, damaged func(*memory.DamagedRecord)) error {
	var after []byte // the last key visited
	for {
		n := 0
		err := s.view(func(tx *bolt.Tx) error {
			c := tx.Bucket(bucketVectors).Cursor()
			k, v := c.First()
			if after != nil {
				if k, v = c.Seek(after); bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && n < vectorChunk; k, v = c.Next() {
				if err := ctx.Err(); err != nil {
					return err
				}
				n++
				after = append(after[:0], k...)
				m, err := decodeVectorRecord(string(k), v)
				var d *memory.DamagedRecord
				if errors.As(err, &d) {
					// Skipped rather than failing the start-up that loads
					// vectors: the message then has none, which verify reports
					// (vector_missing) and --repair embeds again.
					if damaged != nil {
						damaged(d)
					}
					continue
				}
				if err != nil {
					return err
				}
				if err := fn(m); err != nil {
					return err
				}
			}
			releaseMapped(s.db, tx)
			return nil
		})
		if err != nil || n < vectorChunk {
			return err
		}
	}
}

// vectorChunk is how many vector records ForEachVector reads in one
// transaction.
var vectorChunk = 10_000

// ForEachMessage calls fn for every message of every tenant, with its vector.
func (s *Store) ForEachMessage(ctx context.Context, fn func(*memory.Message) error) error {
	return s.view(func(tx *bolt.Tx) error {
		vecs := tx.Bucket(bucketVectors)
		return tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			m, err := decodeMessage(tx, k, v)
			if err != nil {
				return err
			}
			if vb := vecs.Get([]byte(m.ID)); vb != nil {
				v, err := decodeVector(m.ID, vb)
				if err != nil {
					return err
				}
				m.Vector = v
			}
			return fn(m)
		})
	})
}

// ReplaceVectors overwrites the vectors of existing messages, logging an
// upsert for each so the vector index picks them up.
func (s *Store) ReplaceVectors(ctx context.Context, vectors map[string][]float32) error {
	return s.update(func(tx *bolt.Tx) error {
		idb, vecs, msgs := tx.Bucket(bucketIDs), tx.Bucket(bucketVectors), tx.Bucket(bucketMessages)
		for id, v := range vectors {
			key := idb.Get([]byte(id))
			if key == nil {
				continue
			}
			m, err := decodeMessage(tx, key, msgs.Get(key))
			if err != nil {
				return err
			}
			m.Vector = v
			if err := vecs.Put([]byte(id), encodeVector(m)); err != nil {
				return fmt.Errorf("put vector %s: %w", id, err)
			}
			if err := logChange(tx, memory.Change{Op: memory.ChangeUpsert, Tenant: m.Tenant, SessionID: m.SessionID, MessageID: id}); err != nil {
				return err
			}
		}
		return nil
	})
}

// Meta reads a store-wide setting.
func (s *Store) Meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.view(func(tx *bolt.Tx) error {
		v = string(tx.Bucket(bucketMeta).Get([]byte(key)))
		return nil
	})
	return v, err
}

// SetMeta writes a store-wide setting.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(key), []byte(value))
	})
}

// recordDecoder decodes the message record v stored at key k.
type recordDecoder func(k, v []byte) (*memory.Message, error)

// uncachedDecoder is a recordDecoder without a cache: for write
// transactions, whose callers change what they read, and for full scans,
// which would push the windows out of the cache.
func uncachedDecoder(tx *bolt.Tx) recordDecoder {
	return func(k, v []byte) (*memory.Message, error) { return decodeMessage(tx, k, v) }
}
