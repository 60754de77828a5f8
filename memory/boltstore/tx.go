package boltstore

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Update runs fn in one bbolt write transaction on a session.
func (s *Store) Update(ctx context.Context, tenant, sessionID string, fn func(memory.SessionTx) error) (*memory.Session, error) {
	return s.sessionUpdate(ctx, tenant, sessionID, nil, fn)
}

// Write runs fn in one bbolt write transaction on a session it creates
// when missing; like Append it refuses while the disk is nearly full.
func (s *Store) Write(ctx context.Context, tenant, sessionID string, create func() *memory.Session, fn func(memory.SessionTx) error) (*memory.Session, error) {
	if err := s.checkFree(); err != nil {
		return nil, err
	}
	return s.sessionUpdate(ctx, tenant, sessionID, create, fn)
}

// sessionUpdate runs fn on the session, created with create() when it is
// missing (a nil create: ENOTFOUND), and saves the session after it.
func (s *Store) sessionUpdate(ctx context.Context, tenant, sessionID string, create func() *memory.Session, fn func(memory.SessionTx) error) (*memory.Session, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	var sess *memory.Session
	err := s.update(func(tx *bolt.Tx) error {
		var err error
		if create == nil {
			sess, err = getSession(tx, tenant, sessionID)
		} else {
			sess, err = getOrCreateSession(tx, tenant, sessionID, create)
		}
		if err != nil {
			return err
		}
		stx := &sessionTx{tx: tx, sess: sess}
		if err := fn(stx); err != nil {
			return err
		}
		return putSession(tx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

type sessionTx struct {
	tx   *bolt.Tx
	sess *memory.Session
}

func (t *sessionTx) Session() *memory.Session { return t.sess }

func (t *sessionTx) Message(id string) (*memory.Message, error) {
	key := t.tx.Bucket(bucketIDs).Get([]byte(id))
	if key == nil || !bytes.HasPrefix(key, messagePrefix(t.sess.Tenant, t.sess.ID)) {
		return nil, memory.Errorf(memory.ENOTFOUND, "message %s not found in session %s", id, t.sess.ID)
	}
	m, err := decodeMessage(t.tx, key, t.tx.Bucket(bucketMessages).Get(key))
	if err != nil {
		return nil, withID(err, id)
	}
	if vb := t.tx.Bucket(bucketVectors).Get([]byte(id)); vb != nil {
		if m.Vector, err = decodeVector(id, vb); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (t *sessionTx) Messages(q memory.MessageQuery) ([]*memory.Message, error) {
	return listMessages(t.tx, t.sess.Tenant, t.sess.ID, q, true, uncachedDecoder(t.tx))
}

// Put saves a changed message and moves the session's counters from the old
// state to the new.
func (t *sessionTx) Put(m *memory.Message) error {
	old, err := t.Message(m.ID)
	if err != nil {
		return err
	}
	t.sess.Replace(old, m)
	return putMessage(t.tx, m, old)
}

func (t *sessionTx) Append(m *memory.Message) error {
	t.sess.Place(m)
	t.sess.Account(m, +1)
	return putMessage(t.tx, m, nil)
}

func (t *sessionTx) Delete(id string) error {
	m, err := t.Message(id)
	if err != nil {
		return err
	}
	t.sess.Account(m, -1)
	msgs, key := t.tx.Bucket(bucketMessages), messageKey(m.Tenant, m.SessionID, m.Seq)
	if err := promptRelease(t.tx, m.Tenant, m.SessionID, msgs.Get(key)); err != nil {
		return fmt.Errorf("delete message %s: %w", id, err)
	}
	if err := msgs.Delete(key); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketStates).Delete(stateKey(m)); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketIDs).Delete([]byte(id)); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketVectors).Delete([]byte(id)); err != nil {
		return err
	}
	if err := deleteClientID(t.tx, m); err != nil {
		return err
	}
	return logChange(t.tx, memory.Change{Op: memory.ChangeDelete, Tenant: m.Tenant, SessionID: m.SessionID, MessageID: id})
}
