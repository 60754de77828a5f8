package pgstore

import (
	"context"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

// Import writes an exported session back with its messages' own ids, seqs
// and states, its counters recomputed from them (memory.Imported).
func (s *Store) Import(ctx context.Context, sess *memory.Session, msgs []*memory.Message) (*memory.Session, error) {
	out, err := memory.Imported(sess, msgs)
	if err != nil {
		return nil, err
	}
	err = s.loggedTx(ctx, func(tx pgx.Tx) error {
		b, err := encodeSession(out)
		if err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO sessions (tenant, id, body) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, out.Tenant, out.ID, b)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.Errorf(memory.ECONFLICT, "session %q of tenant %q exists already", sess.ID, sess.Tenant)
		}
		if err := insertMessages(ctx, tx, msgs); err != nil {
			return err
		}
		changes := make([]memory.Change, len(msgs))
		for i, m := range msgs {
			changes[i] = memory.Change{Op: memory.ChangeUpsert, Tenant: m.Tenant, SessionID: m.SessionID, MessageID: m.ID}
		}
		return queueChanges(ctx, tx, changes)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// View runs fn in a REPEATABLE READ, read-only transaction: every read sees
// the database as of View's call while writers go on committing.
func (s *Store) View(ctx context.Context, fn func(memory.Snapshot) error) error {
	return s.read(ctx, func(tx pgx.Tx) error {
		// PostgreSQL takes the snapshot at a transaction's first
		// statement, not at BEGIN: take it now.
		if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
			return err
		}
		return fn(&snapshot{ctx: ctx, s: s, tx: tx})
	})
}

type snapshot struct {
	ctx context.Context
	s   *Store
	tx  pgx.Tx
}

func (v *snapshot) Session(tenant, id string) (*memory.Session, error) {
	return getSession(v.ctx, v.tx, tenant, id)
}

func (v *snapshot) ForEachSession(tenant string, fn func(*memory.Session) error) error {
	return v.s.forEachSession(v.ctx, v.tx, tenant, "", -1, fn)
}

func (v *snapshot) Messages(tenant, sessionID string, q memory.MessageQuery) ([]*memory.Message, error) {
	if err := sessionExists(v.ctx, v.tx, tenant, sessionID); err != nil {
		return nil, dbErr(err)
	}
	out, err := listMessages(v.ctx, v.tx, tenant, sessionID, q, q.Vectors)
	return out, dbErr(err)
}

func (v *snapshot) Meta(key string) (string, error) { return meta(v.ctx, v.tx, key) }
