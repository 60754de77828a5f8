package pgstore

import (
	"context"
	"errors"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

func unixNano(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// Session returns one session.
func (s *Store) Session(ctx context.Context, tenant, id string) (*memory.Session, error) {
	if err := ctxErr(ctx); err != nil {
		return nil, err
	}
	return getSession(ctx, s.pool, tenant, id)
}

func getSession(ctx context.Context, q querier, tenant, id string) (*memory.Session, error) {
	var body []byte
	err := q.QueryRow(ctx, `SELECT body FROM sessions WHERE tenant = $1 AND id = $2`, tenant, id).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, memory.Errorf(memory.ENOTFOUND, "session %q not found", id)
	}
	if err != nil {
		return nil, dbErr(err)
	}
	return decodeSession(tenant, id, body)
}

// Sessions lists a tenant's sessions in id order (bytes), after `after`.
func (s *Store) Sessions(ctx context.Context, tenant, after string, limit int) ([]*memory.Session, error) {
	if limit <= 0 {
		limit = -1
	}
	var out []*memory.Session
	err := s.forEachSession(ctx, s.pool, tenant, after, limit, func(sess *memory.Session) error {
		out = append(out, sess)
		return nil
	})
	return out, err
}

// forEachSession visits sessions of tenant ("": of all tenants, by tenant)
// after the id after, at most limit (-1: all).
func (s *Store) forEachSession(ctx context.Context, q querier, tenant, after string, limit int, fn func(*memory.Session) error) error {
	sql := `SELECT tenant, id, body FROM sessions WHERE tenant = $1 AND id > $2 ORDER BY id LIMIT $3`
	args := []any{tenant, after, nil}
	if limit >= 0 {
		args[2] = limit
	}
	if tenant == "" {
		sql, args = `/* all tenants: asked for */ SELECT tenant, id, body FROM sessions ORDER BY tenant, id`, nil
	}
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return dbErr(err)
	}
	defer rows.Close()
	for rows.Next() {
		var t, id string
		var body []byte
		if err := rows.Scan(&t, &id, &body); err != nil {
			return dbErr(err)
		}
		sess, err := decodeSession(t, id, body)
		if err != nil {
			return err
		}
		if err := fn(sess); err != nil {
			return err
		}
	}
	return dbErr(rows.Err())
}

// UpdateSession creates or changes a session's settings under its lock.
func (s *Store) UpdateSession(ctx context.Context, tenant, id string, create func() *memory.Session, update func(*memory.Session) error) (*memory.Session, error) {
	var sess *memory.Session
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		if sess, err = lockSession(ctx, tx, tenant, id, create); err != nil {
			return err
		}
		if err := update(sess); err != nil {
			return err
		}
		return saveSession(ctx, tx, sess)
	})
	if err != nil {
		return nil, err
	}
	return sess, nil
}

// DeleteSession removes a session with its messages, client ids,
// idempotency keys and window layout, and logs one change.
func (s *Store) DeleteSession(ctx context.Context, tenant, id string) error {
	return s.loggedTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE tenant = $1 AND id = $2`, tenant, id)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return memory.Errorf(memory.ENOTFOUND, "session %q not found", id)
		}
		for _, table := range []string{"messages", "client_ids", "write_keys", "window_layouts"} {
			if _, err := tx.Exec(ctx, `DELETE FROM `+table+` WHERE tenant = $1 AND session_id = $2`, tenant, id); err != nil {
				return err
			}
		}
		return queueChanges(ctx, tx, []memory.Change{{Op: memory.ChangeDeleteSession, Tenant: tenant, SessionID: id}})
	})
}

// Tenants lists the tenants that have sessions.
func (s *Store) Tenants(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `/* all tenants: asked for */ SELECT DISTINCT tenant FROM sessions ORDER BY tenant`)
	if err != nil {
		return nil, dbErr(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, dbErr(err)
}
