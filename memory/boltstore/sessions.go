package boltstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Session returns one session.
func (s *Store) Session(ctx context.Context, tenant, id string) (*memory.Session, error) {
	var sess *memory.Session
	err := s.view(func(tx *bolt.Tx) error {
		var err error
		sess, err = getSession(tx, tenant, id)
		return err
	})
	return sess, err
}

// Sessions lists a tenant's sessions in id order, after the id `after`.
func (s *Store) Sessions(ctx context.Context, tenant, after string, limit int) ([]*memory.Session, error) {
	var out []*memory.Session
	err := s.view(func(tx *bolt.Tx) error {
		prefix := sessionKey(tenant, "")
		c := tx.Bucket(bucketSessions).Cursor()
		k, v := c.Seek(sessionKey(tenant, after))
		if after != "" && k != nil && bytes.Equal(k, sessionKey(tenant, after)) {
			k, v = c.Next()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			if limit > 0 && len(out) == limit {
				break
			}
			sess, err := decodeSession(k, v)
			if err != nil {
				return err
			}
			out = append(out, sess)
		}
		return nil
	})
	return out, err
}

// UpdateSession creates or changes a session's settings in one transaction.
func (s *Store) UpdateSession(ctx context.Context, tenant, id string, create func() *memory.Session, update func(*memory.Session) error) (*memory.Session, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	var sess *memory.Session
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		if sess, err = getOrCreateSession(tx, tenant, id, create); err != nil {
			return err
		}
		if err := update(sess); err != nil {
			return err
		}
		return putSession(tx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// DeleteSession removes the session, its messages, ids and vectors, and logs
// one change so the indexes drop it too.
func (s *Store) DeleteSession(ctx context.Context, tenant, id string) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return s.updateFreeing(func(tx *bolt.Tx) error {
		if _, err := getSession(tx, tenant, id); err != nil {
			return err
		}
		msgs, ids, vecs := tx.Bucket(bucketMessages), tx.Bucket(bucketIDs), tx.Bucket(bucketVectors)
		prefix := messagePrefix(tenant, id)
		// Collect first: deleting under a bbolt cursor skips keys.
		var keys [][]byte
		var damagedKeys map[string]bool
		c := msgs.Cursor()
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			keys = append(keys, append([]byte(nil), k...))
			m, err := decodeMessage(tx, k, v)
			if err != nil {
				// Deleting the session is how a damaged record goes away:
				// its id is found from the ids bucket below instead.
				if damagedKeys == nil {
					damagedKeys = map[string]bool{}
				}
				damagedKeys[string(k)] = true
				continue
			}
			if err := ids.Delete([]byte(m.ID)); err != nil {
				return fmt.Errorf("delete id %s: %w", m.ID, err)
			}
			if err := vecs.Delete([]byte(m.ID)); err != nil {
				return fmt.Errorf("delete vector %s: %w", m.ID, err)
			}
		}
		if err := deleteIDsOf(ids, vecs, damagedKeys); err != nil {
			return err
		}
		for _, k := range keys {
			if err := msgs.Delete(k); err != nil {
				return fmt.Errorf("delete message: %w", err)
			}
		}
		if err := deletePrefix(tx.Bucket(bucketStates), prefix); err != nil {
			return fmt.Errorf("delete state entries: %w", err)
		}
		if err := deletePrefix(tx.Bucket(bucketPrompts), prefix); err != nil {
			return fmt.Errorf("delete prompts: %w", err)
		}
		// A new session of the same id starts without the old one's
		// client ids and idempotency keys.
		for _, b := range [][]byte{bucketClient, bucketWrites} {
			if err := deletePrefix(tx.Bucket(b), prefix); err != nil {
				return fmt.Errorf("delete %s of session %s: %w", b, id, err)
			}
		}
		if err := tx.Bucket(bucketSessions).Delete(sessionKey(tenant, id)); err != nil {
			return fmt.Errorf("delete session %s: %w", id, err)
		}
		return logChange(tx, memory.Change{Op: memory.ChangeDeleteSession, Tenant: tenant, SessionID: id})
	})
}

// deleteIDsOf deletes the id and vector entries of the message records at
// keys (records too damaged to read their id from): a scan of every id, so
// only for the rare damaged record.
func deleteIDsOf(ids, vecs *bolt.Bucket, keys map[string]bool) error {
	if len(keys) == 0 {
		return nil
	}
	var gone [][]byte
	err := ids.ForEach(func(id, key []byte) error {
		if keys[string(key)] {
			gone = append(gone, bytes.Clone(id))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("find ids of damaged records: %w", err)
	}
	for _, id := range gone {
		if err := ids.Delete(id); err != nil {
			return fmt.Errorf("delete id %s: %w", id, err)
		}
		if err := vecs.Delete(id); err != nil {
			return fmt.Errorf("delete vector %s: %w", id, err)
		}
	}
	return nil
}

// Tenants lists the tenants that have sessions, skipping over each tenant's
// sessions with one seek.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	var out []string
	err := s.view(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketSessions).Cursor()
		for k, _ := c.First(); k != nil; {
			i := bytes.IndexByte(k, 0)
			if i < 0 {
				return fmt.Errorf("session key %q has no tenant", k)
			}
			tenant := string(k[:i])
			out = append(out, tenant)
			k, _ = c.Seek(append([]byte(tenant), 1))
		}
		return nil
	})
	return out, err
}

func deletePrefix(b *bolt.Bucket, prefix []byte) error {
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
