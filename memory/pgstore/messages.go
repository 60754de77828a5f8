package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// querier is what reads need: the pool, or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// scanMessage reads seq, body and (withVector) vector.
func scanMessage(row pgx.Row, tenant, session, id string, withVector bool) (*memory.Message, error) {
	var seq int64
	var body, vec []byte
	if err := row.Scan(&seq, &body, &vec); err != nil {
		return nil, err
	}
	m, err := decodeMessage(tenant, session, uint64(seq), id, body)
	if err != nil {
		return nil, err
	}
	if withVector {
		if m.Vector, err = decodeVector(m.ID, vec); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func listMessages(ctx context.Context, q querier, tenant, session string, mq memory.MessageQuery, withVectors bool) ([]*memory.Message, error) {
	vec := "NULL::bytea"
	if withVectors {
		vec = "vector"
	}
	sql := `SELECT seq, body, ` + vec + `, id FROM messages WHERE tenant = $1 AND session_id = $2 AND seq > $3`
	args := []any{tenant, session, int64(mq.AfterSeq)}
	if len(mq.States) > 0 {
		states := make([]string, len(mq.States))
		for i, s := range mq.States {
			states[i] = string(s)
		}
		args = append(args, states)
		sql += fmt.Sprintf(` AND state = ANY($%d)`, len(args))
	}
	order := ` ORDER BY seq`
	if mq.Desc {
		if mq.BeforeSeq > 0 {
			args = append(args, int64(mq.BeforeSeq))
			sql += fmt.Sprintf(` AND seq < $%d`, len(args))
		}
		order = ` ORDER BY seq DESC`
	}
	sql += order
	if mq.Limit > 0 {
		sql += fmt.Sprintf(` LIMIT %d`, mq.Limit)
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*memory.Message
	for rows.Next() {
		var seq int64
		var body, vb []byte
		var id string
		if err := rows.Scan(&seq, &body, &vb, &id); err != nil {
			return nil, err
		}
		m, err := decodeMessage(tenant, session, uint64(seq), id, body)
		if err != nil {
			return nil, err
		}
		if withVectors {
			if m.Vector, err = decodeVector(id, vb); err != nil {
				return nil, err
			}
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

func sessionExists(ctx context.Context, q querier, tenant, id string) error {
	var one int
	err := q.QueryRow(ctx, `SELECT 1 FROM sessions WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return memory.Errorf(memory.ENOTFOUND, "session %q not found", id)
	}
	return err
}

// Messages lists a session's messages in order.
func (s *Store) Messages(ctx context.Context, tenant, sessionID string, q memory.MessageQuery) ([]*memory.Message, error) {
	// One statement, one snapshot: a context call lists messages three
	// times, and a read transaction around each was four round trips.
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	out, err := listMessages(ctx, s.pool, tenant, sessionID, q, q.Vectors)
	if err != nil {
		return nil, dbErr(err)
	}
	if len(out) == 0 {
		if err := sessionExists(ctx, s.pool, tenant, sessionID); err != nil {
			return nil, dbErr(err)
		}
	}
	return out, nil
}

// read runs fn in a read-only transaction: its reads see one instant.
func (s *Store) read(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

// MessagesByID returns the tenant's messages with these ids, in the order
// asked; other tenants' ids are as missing.
func (s *Store) MessagesByID(ctx context.Context, tenant string, ids []string, withVectors bool) ([]*memory.Message, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	vec := "NULL::bytea"
	if withVectors {
		vec = "vector"
	}
	rows, err := s.pool.Query(ctx, `SELECT seq, body, `+vec+`, id, session_id FROM messages WHERE tenant = $1 AND id = ANY($2)`, tenant, ids)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	byID := make(map[string]*memory.Message, len(ids))
	for rows.Next() {
		var seq int64
		var body, vb []byte
		var id, session string
		if err := rows.Scan(&seq, &body, &vb, &id, &session); err != nil {
			return nil, dbErr(err)
		}
		m, err := decodeMessage(tenant, session, uint64(seq), id, body)
		if err != nil {
			return nil, err
		}
		if m.Vector, err = decodeVector(id, vb); err != nil {
			return nil, err
		}
		byID[id] = m
	}
	if err := rows.Err(); err != nil {
		return nil, dbErr(err)
	}
	out := make([]*memory.Message, 0, len(byID))
	for _, id := range ids {
		if m := byID[id]; m != nil {
			out = append(out, m)
		}
	}
	return out, nil
}

// Changes returns change-feed entries after a seq, in order.
func (s *Store) Changes(ctx context.Context, after uint64, limit int) ([]memory.Change, error) {
	sql := `/* all tenants: a node follows every tenant's changes */ SELECT seq, op, tenant, session_id, message_id FROM changes WHERE seq > $1 ORDER BY seq`
	if limit > 0 {
		sql += fmt.Sprintf(` LIMIT %d`, limit)
	}
	rows, err := s.pool.Query(ctx, sql, int64(after))
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	var out []memory.Change
	for rows.Next() {
		var c memory.Change
		var seq int64
		var op string
		if err := rows.Scan(&seq, &op, &c.Tenant, &c.SessionID, &c.MessageID); err != nil {
			return nil, dbErr(err)
		}
		c.Seq, c.Op = uint64(seq), memory.ChangeOp(op)
		out = append(out, c)
	}
	return out, dbErr(rows.Err())
}

// ForEachVector calls fn for every message with a vector, with the fields
// the vector index needs, without reading bodies.
func (s *Store) ForEachVector(ctx context.Context, fn func(*memory.Message) error, damaged func(*memory.DamagedRecord)) error {
	return s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `/* all tenants: the vector index is built from every tenant's vectors */
			SELECT id, tenant, session_id, seq, state, role, kind, created_at, vector FROM messages WHERE vector IS NOT NULL ORDER BY tenant, session_id, seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var m memory.Message
			var seq, at int64
			var state, role string
			var vb []byte
			if err := rows.Scan(&m.ID, &m.Tenant, &m.SessionID, &seq, &state, &role, &m.Kind, &at, &vb); err != nil {
				return err
			}
			m.Seq, m.State, m.Role, m.CreatedAt = uint64(seq), memory.State(state), memory.Role(role), unixNano(at)
			var derr error
			if m.Vector, derr = decodeVector(m.ID, vb); derr != nil {
				var d *memory.DamagedRecord
				if errors.As(derr, &d) && damaged != nil {
					d.Tenant, d.SessionID, d.Seq = m.Tenant, m.SessionID, m.Seq
					damaged(d)
				}
				continue
			}
			if err := fn(&m); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// ForEachMessage calls fn for every message of every tenant, with its
// vector, in tenant, session and seq order.
func (s *Store) ForEachMessage(ctx context.Context, fn func(*memory.Message) error) error {
	return s.ScanMessages(ctx, fn, nil)
}

// ScanMessages is ForEachMessage handing damaged records to damaged (nil:
// the first one fails the scan).
func (s *Store) ScanMessages(ctx context.Context, fn func(*memory.Message) error, damaged func(*memory.DamagedRecord)) error {
	return s.read(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `/* all tenants: a scan of the whole store */ SELECT tenant, session_id, seq, id, body, vector FROM messages ORDER BY tenant, session_id, seq`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var tenant, session, id string
			var seq int64
			var body, vb []byte
			if err := rows.Scan(&tenant, &session, &seq, &id, &body, &vb); err != nil {
				return err
			}
			m, err := decodeMessage(tenant, session, uint64(seq), id, body)
			if err == nil {
				m.Vector, err = decodeVector(id, vb)
			}
			var d *memory.DamagedRecord
			if errors.As(err, &d) && damaged != nil {
				damaged(d)
				continue
			}
			if err != nil {
				return err
			}
			if err := fn(m); err != nil {
				return err
			}
		}
		return rows.Err()
	})
}

// ReplaceVectors overwrites the vectors of existing messages (of any
// tenant: the embedding model is the store's) and logs an upsert of each.
func (s *Store) ReplaceVectors(ctx context.Context, vectors map[string][]float32) error {
	ids := make([]string, 0, len(vectors))
	vecs := make([][]byte, 0, len(vectors))
	for id, v := range vectors {
		ids, vecs = append(ids, id), append(vecs, encodeVector(v))
	}
	return s.loggedTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `/* all tenants: the embedding model is the store's */ UPDATE messages m SET vector = v.vector FROM unnest($1::text[], $2::bytea[]) AS v(id, vector)
			WHERE m.id = v.id RETURNING m.tenant, m.session_id, m.id`, ids, vecs)
		if err != nil {
			return err
		}
		var changes []memory.Change
		for rows.Next() {
			c := memory.Change{Op: memory.ChangeUpsert}
			if err := rows.Scan(&c.Tenant, &c.SessionID, &c.MessageID); err != nil {
				return err
			}
			changes = append(changes, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		return queueChanges(ctx, tx, changes)
	})
}

// Meta reads a store-wide setting.
func (s *Store) Meta(ctx context.Context, key string) (string, error) {
	return meta(ctx, s.pool, key)
}

func meta(ctx context.Context, q querier, key string) (string, error) {
	var v string
	err := q.QueryRow(ctx, `SELECT value FROM meta WHERE tenant = $1 AND key = $2`, storeWide, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	return v, dbErr(err)
}

// SetMeta writes a store-wide setting.
func (s *Store) SetMeta(ctx context.Context, key, value string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO meta (tenant, key, value) VALUES ($1, $2, $3) ON CONFLICT (tenant, key) DO UPDATE SET value = excluded.value`, storeWide, key, value)
	return dbErr(err)
}
