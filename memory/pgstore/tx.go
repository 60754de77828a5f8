package pgstore

import (
	"context"
	"errors"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

// Update runs fn in one transaction on a session, holding its row lock.
func (s *Store) Update(ctx context.Context, tenant, sessionID string, fn func(memory.SessionTx) error) (*memory.Session, error) {
	return s.sessionWrite(ctx, tenant, sessionID, nil, fn)
}

// Write is Update on a session it creates when missing.
func (s *Store) Write(ctx context.Context, tenant, sessionID string, create func() *memory.Session, fn func(memory.SessionTx) error) (*memory.Session, error) {
	return s.sessionWrite(ctx, tenant, sessionID, create, fn)
}

// Append stores msgs at the end of a session in one transaction.
func (s *Store) Append(ctx context.Context, tenant, id string, create func() *memory.Session, msgs []*memory.Message) (*memory.Session, error) {
	return s.sessionWrite(ctx, tenant, id, create, func(tx memory.SessionTx) error {
		sess := tx.Session()
		for _, m := range msgs {
			if err := tx.Append(m); err != nil {
				return err
			}
		}
		if n := len(msgs); n > 0 && msgs[n-1].CreatedAt.After(sess.UpdatedAt) {
			sess.UpdatedAt = msgs[n-1].CreatedAt
		}
		return nil
	})
}

// sessionWrite locks the session's row (creating the session with create
// when it is missing; nil create: ENOTFOUND), runs fn, saves the session
// and logs fn's changes, in one transaction.
func (s *Store) sessionWrite(ctx context.Context, tenant, id string, create func() *memory.Session, fn func(memory.SessionTx) error) (*memory.Session, error) {
	var sess *memory.Session
	var stx *sessionTx
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if sess, err = lockSession(ctx, tx, tenant, id, create); err != nil {
			return err
		}
		stx = &sessionTx{ctx: ctx, tx: tx, sess: sess}
		if err := fn(stx); err != nil {
			return err
		}
		if err := stx.flush(); err != nil {
			return err
		}
		if err := saveSession(ctx, tx, sess); err != nil {
			return err
		}
		return queueChanges(ctx, tx, stx.changes)
	})
	if err != nil {
		return nil, err
	}
	if len(stx.changes) > 0 {
		s.numbered()
	}
	return sess, nil
}

// lockSession reads the session FOR UPDATE. A missing one is inserted
// from create() (ON CONFLICT DO NOTHING: a node creating it at the same
// moment wins, and this one then locks theirs).
func lockSession(ctx context.Context, tx pgx.Tx, tenant, id string, create func() *memory.Session) (*memory.Session, error) {
	for range 2 {
		var body []byte
		err := tx.QueryRow(ctx, `SELECT body FROM sessions WHERE tenant = $1 AND id = $2 FOR UPDATE`, tenant, id).Scan(&body)
		if err == nil {
			return decodeSession(tenant, id, body)
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, err
		}
		if create == nil {
			return nil, memory.Errorf(memory.ENOTFOUND, "session %q not found", id)
		}
		sess := create()
		b, err := encodeSession(sess)
		if err != nil {
			return nil, err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO sessions (tenant, id, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, tenant, id, b)
		if err != nil {
			return nil, err
		}
		if tag.RowsAffected() == 1 {
			return sess, nil // the row is ours, locked by its insert
		}
	}
	return nil, memory.Errorf(memory.EUNAVAILABLE, "session %q was created and deleted while this write waited: retry", id)
}

func saveSession(ctx context.Context, tx pgx.Tx, sess *memory.Session) error {
	b, err := encodeSession(sess)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `UPDATE sessions SET body = $3 WHERE tenant = $1 AND id = $2`, sess.Tenant, sess.ID, b)
	return err
}

type sessionTx struct {
	ctx     context.Context
	tx      pgx.Tx
	sess    *memory.Session
	changes []memory.Change
	pending []*memory.Message // appended, not yet sent: see flush
}

func (t *sessionTx) Session() *memory.Session { return t.sess }

func (t *sessionTx) logged(op memory.ChangeOp, id string) {
	t.changes = append(t.changes, memory.Change{Op: op, Tenant: t.sess.Tenant, SessionID: t.sess.ID, MessageID: id})
}

func (t *sessionTx) Message(id string) (*memory.Message, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	row := t.tx.QueryRow(t.ctx, `SELECT seq, body, vector FROM messages WHERE tenant = $1 AND session_id = $2 AND id = $3`,
		t.sess.Tenant, t.sess.ID, id)
	m, err := scanMessage(row, t.sess.Tenant, t.sess.ID, id, true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, memory.Errorf(memory.ENOTFOUND, "message %s not found in session %s", id, t.sess.ID)
	}
	return m, err
}

func (t *sessionTx) Messages(q memory.MessageQuery) ([]*memory.Message, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	return listMessages(t.ctx, t.tx, t.sess.Tenant, t.sess.ID, q, true)
}

// Put saves a changed message, moving the session's counters from its
// stored state to the new.
func (t *sessionTx) Put(m *memory.Message) error {
	old, err := t.Message(m.ID)
	if err != nil {
		return err
	}
	t.sess.Replace(old, m)
	body, err := encodeMessage(m)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `UPDATE messages SET state = $4, role = $5, kind = $6, created_at = $7, body = $8, vector = $9
		WHERE tenant = $1 AND session_id = $2 AND seq = $3`,
		m.Tenant, m.SessionID, int64(m.Seq), string(m.State), string(m.Role), m.Kind, m.CreatedAt.UnixNano(), body, encodeVector(m.Vector))
	if err != nil {
		return err
	}
	if old.ClientID != "" && old.ClientID != m.ClientID {
		if err := deleteClientID(t.ctx, t.tx, old); err != nil {
			return err
		}
	}
	if err := putClientID(t.ctx, t.tx, m); err != nil {
		return err
	}
	t.logged(memory.ChangeUpsert, m.ID)
	return nil
}

// Append adds a new message at the end of the session.
func (t *sessionTx) Append(m *memory.Message) error {
	t.sess.Place(m)
	t.sess.Account(m, +1)
	t.pending = append(t.pending, m)
	t.logged(memory.ChangeUpsert, m.ID)
	return nil
}

// insertMessages writes new messages and their client ids in one round
// trip (a pipeline of statements): a batch of 100 was 100 round trips.
func insertMessages(ctx context.Context, tx pgx.Tx, msgs []*memory.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	var b pgx.Batch
	var of []*memory.Message // the message of each queued statement
	for _, m := range msgs {
		body, err := encodeMessage(m)
		if err != nil {
			return err
		}
		b.Queue(`INSERT INTO messages (tenant, session_id, seq, id, state, role, kind, created_at, body, vector)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			m.Tenant, m.SessionID, int64(m.Seq), m.ID, string(m.State), string(m.Role), m.Kind, m.CreatedAt.UnixNano(), body, encodeVector(m.Vector))
		of = append(of, m)
		if m.ClientID != "" {
			b.Queue(putClientIDSQL, m.Tenant, m.SessionID, m.ClientID, m.ID)
			of = append(of, m)
		}
	}
	br := tx.SendBatch(ctx, &b)
	for _, m := range of {
		if _, err := br.Exec(); err != nil {
			br.Close()
			if memory.ErrorCode(dbErr(err)) == memory.ECONFLICT {
				return memory.Errorf(memory.ECONFLICT, "message id %s exists already", m.ID)
			}
			return err
		}
	}
	return br.Close()
}

// flush writes the messages Append queued: every other statement of the
// transaction flushes first, so it reads them.
func (t *sessionTx) flush() error {
	pending := t.pending
	t.pending = nil
	return insertMessages(t.ctx, t.tx, pending)
}

// Delete removes a message for good.
func (t *sessionTx) Delete(id string) error {
	m, err := t.Message(id)
	if err != nil {
		return err
	}
	t.sess.Account(m, -1)
	if _, err := t.tx.Exec(t.ctx, `DELETE FROM messages WHERE tenant = $1 AND session_id = $2 AND seq = $3`, m.Tenant, m.SessionID, int64(m.Seq)); err != nil {
		return err
	}
	if err := deleteClientID(t.ctx, t.tx, m); err != nil {
		return err
	}
	t.logged(memory.ChangeDelete, id)
	return nil
}
