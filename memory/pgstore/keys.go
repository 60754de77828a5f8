package pgstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

// Idempotency keys and client message ids (memory/idempotency.go): rows
// under the session's tenant and id, written in the write's transaction.

func getWriteRecord(ctx context.Context, q querier, tenant, session, key string) (*memory.WriteRecord, error) {
	var body []byte
	err := q.QueryRow(ctx, `SELECT body FROM write_keys WHERE tenant = $1 AND session_id = $2 AND key = $3`, tenant, session, key).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, dbErr(err)
	}
	var rec memory.WriteRecord
	if err := json.Unmarshal(body, &rec); err != nil {
		return nil, fmt.Errorf("decode write record of session %s: %w", session, err)
	}
	return &rec, nil
}

// WriteKey returns the record of a session's write with an idempotency key.
func (s *Store) WriteKey(ctx context.Context, tenant, sessionID, key string) (*memory.WriteRecord, error) {
	return getWriteRecord(ctx, s.pool, tenant, sessionID, key)
}

// MessagesByClientID returns the session's messages with these client ids.
func (s *Store) MessagesByClientID(ctx context.Context, tenant, sessionID string, clientIDs []string) (map[string]*memory.Message, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.client_id, m.seq, m.body, m.id FROM client_ids c
		JOIN messages m ON m.tenant = c.tenant AND m.session_id = c.session_id AND m.id = c.message_id
		WHERE c.tenant = $1 AND c.session_id = $2 AND c.client_id = ANY($3)`, tenant, sessionID, clientIDs)
	if err != nil {
		return nil, dbErr(err)
	}
	defer rows.Close()
	out := map[string]*memory.Message{}
	for rows.Next() {
		var cid, id string
		var seq int64
		var body []byte
		if err := rows.Scan(&cid, &seq, &body, &id); err != nil {
			return nil, dbErr(err)
		}
		m, err := decodeMessage(tenant, sessionID, uint64(seq), id, body)
		if err != nil {
			return nil, err
		}
		out[cid] = m
	}
	return out, dbErr(rows.Err())
}

func (t *sessionTx) WriteKey(key string) (*memory.WriteRecord, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	return getWriteRecord(t.ctx, t.tx, t.sess.Tenant, t.sess.ID, key)
}

// PutWriteKey records rec, then forgets the session's records made before
// expireBefore and all but the newest keep.
func (t *sessionTx) PutWriteKey(rec *memory.WriteRecord, expireBefore time.Time, keep int) error {
	if err := t.flush(); err != nil {
		return err
	}
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode write record %q: %w", rec.Key, err)
	}
	tenant, session := t.sess.Tenant, t.sess.ID
	_, err = t.tx.Exec(t.ctx, `INSERT INTO write_keys (tenant, session_id, key, at, body) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (tenant, session_id, key) DO UPDATE SET at = excluded.at, body = excluded.body`,
		tenant, session, rec.Key, rec.At.UnixNano(), body)
	if err != nil {
		return err
	}
	_, err = t.tx.Exec(t.ctx, `DELETE FROM write_keys WHERE tenant = $1 AND session_id = $2 AND (at < $3 OR key IN (
		SELECT key FROM write_keys WHERE tenant = $1 AND session_id = $2 ORDER BY at DESC, key DESC OFFSET $4))`,
		tenant, session, expireBefore.UnixNano(), keep)
	return err
}

func (t *sessionTx) MessageByClientID(clientID string) (*memory.Message, error) {
	if err := t.flush(); err != nil {
		return nil, err
	}
	var id string
	err := t.tx.QueryRow(t.ctx, `SELECT message_id FROM client_ids WHERE tenant = $1 AND session_id = $2 AND client_id = $3`,
		t.sess.Tenant, t.sess.ID, clientID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return t.Message(id)
}

const putClientIDSQL = `INSERT INTO client_ids (tenant, session_id, client_id, message_id) VALUES ($1, $2, $3, $4)
	ON CONFLICT (tenant, session_id, client_id) DO UPDATE SET message_id = excluded.message_id`

func putClientID(ctx context.Context, tx pgx.Tx, m *memory.Message) error {
	if m.ClientID == "" {
		return nil
	}
	_, err := tx.Exec(ctx, putClientIDSQL, m.Tenant, m.SessionID, m.ClientID, m.ID)
	return err
}

// deleteClientID forgets m's client id, if it still names m.
func deleteClientID(ctx context.Context, tx pgx.Tx, m *memory.Message) error {
	if m.ClientID == "" {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM client_ids WHERE tenant = $1 AND session_id = $2 AND client_id = $3 AND message_id = $4`,
		m.Tenant, m.SessionID, m.ClientID, m.ID)
	return err
}
