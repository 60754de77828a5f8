package boltstore

import (
	"bytes"
	"context"

	"github.com/ctxd/ctxd/memory"
	bolt "go.etcd.io/bbolt"
)

// Update runs fn in one bbolt write transaction on a session.
func (s *Store) Update(ctx context.Context, tenant, sessionID string, fn func(memory.SessionTx) error) (*memory.Session, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	var sess *memory.Session
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		if sess, err = getSession(tx, tenant, sessionID); err != nil {
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
	m, err := decodeMessage(t.tx.Bucket(bucketMessages).Get(key))
	if err != nil {
		return nil, err
	}
	if vb := t.tx.Bucket(bucketVectors).Get([]byte(id)); vb != nil {
		m.Vector = decodeVector(vb)
	}
	return m, nil
}

func (t *sessionTx) Messages(q memory.MessageQuery) ([]*memory.Message, error) {
	var out []*memory.Message
	prefix := messagePrefix(t.sess.Tenant, t.sess.ID)
	c := t.tx.Bucket(bucketMessages).Cursor()
	vecs := t.tx.Bucket(bucketVectors)
	for k, v := c.Seek(messageKey(t.sess.Tenant, t.sess.ID, q.AfterSeq+1)); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
		m, err := decodeMessage(v)
		if err != nil {
			return nil, err
		}
		if !q.Matches(m) {
			continue
		}
		if vb := vecs.Get([]byte(m.ID)); vb != nil {
			m.Vector = decodeVector(vb)
		}
		out = append(out, m)
		if q.Limit > 0 && len(out) == q.Limit {
			break
		}
	}
	return out, nil
}

// Put saves a changed message and moves the session's counters from the old
// state to the new.
func (t *sessionTx) Put(m *memory.Message) error {
	old, err := t.Message(m.ID)
	if err != nil {
		return err
	}
	m.Tenant, m.SessionID, m.Seq = old.Tenant, old.SessionID, old.Seq
	if m.Vector == nil {
		m.Vector = old.Vector
	}
	account(t.sess, old, -1)
	account(t.sess, m, +1)
	return putMessage(t.tx, m, false)
}

func (t *sessionTx) Append(m *memory.Message) error {
	t.sess.LastSeq++
	m.Tenant, m.SessionID, m.Seq = t.sess.Tenant, t.sess.ID, t.sess.LastSeq
	account(t.sess, m, +1)
	return putMessage(t.tx, m, true)
}

func (t *sessionTx) Delete(id string) error {
	m, err := t.Message(id)
	if err != nil {
		return err
	}
	account(t.sess, m, -1)
	if err := t.tx.Bucket(bucketMessages).Delete(messageKey(m.Tenant, m.SessionID, m.Seq)); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketIDs).Delete([]byte(id)); err != nil {
		return err
	}
	if err := t.tx.Bucket(bucketVectors).Delete([]byte(id)); err != nil {
		return err
	}
	return logChange(t.tx, memory.Change{Op: memory.ChangeDelete, Tenant: m.Tenant, SessionID: m.SessionID, MessageID: id})
}

// account adds (sign +1) or removes (-1) a message's share of the session's
// counters.
func account(sess *memory.Session, m *memory.Message, sign int) {
	sess.Counts.Add(m.State, sign)
	if m.InWindow() {
		sess.Tokens += sign * m.Tokens
	}
	if m.IsSummary() {
		sess.Summaries += sign
	}
}
