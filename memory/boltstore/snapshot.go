package boltstore

import (
	"bytes"
	"context"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// View runs fn in one bbolt read transaction: bbolt's MVCC gives it the
// file as of the transaction's start while writers keep committing.
func (s *Store) View(ctx context.Context, fn func(memory.Snapshot) error) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	return s.view(func(tx *bolt.Tx) error { return fn(&snapshot{ctx: ctx, tx: tx}) })
}

type snapshot struct {
	ctx context.Context
	tx  *bolt.Tx
}

func (v *snapshot) Session(tenant, id string) (*memory.Session, error) {
	return getSession(v.tx, tenant, id)
}

func (v *snapshot) ForEachSession(tenant string, fn func(*memory.Session) error) error {
	var prefix []byte
	if tenant != "" {
		prefix = sessionKey(tenant, "")
	}
	c := v.tx.Bucket(bucketSessions).Cursor()
	for k, b := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, b = c.Next() {
		// A long walk must stop when its caller has gone: the open read
		// transaction keeps the file from reusing freed pages.
		if err := ctxErr(v.ctx); err != nil {
			return err
		}
		sess, err := decodeSession(k, b)
		if err != nil {
			return err
		}
		if err := fn(sess); err != nil {
			return err
		}
	}
	return nil
}

// Messages decodes without the shared decode cache: a snapshot is mostly
// read by an export, which reads every record once and would only evict
// what the serving path keeps warm.
func (v *snapshot) Messages(tenant, sessionID string, q memory.MessageQuery) ([]*memory.Message, error) {
	if err := ctxErr(v.ctx); err != nil {
		return nil, err
	}
	if err := sessionExists(v.tx, tenant, sessionID); err != nil {
		return nil, err
	}
	return listMessages(v.tx, tenant, sessionID, q, q.Vectors, uncachedDecoder(v.tx))
}

func (v *snapshot) Meta(key string) (string, error) {
	return string(v.tx.Bucket(bucketMeta).Get([]byte(key))), nil
}
