package pgstore

import (
	"context"

	"github.com/ctxd/ctxd/memory"
)

var _ memory.SessionLocker = (*Store)(nil)

// LockSession holds the session's row of session_locks (FOR UPDATE, in a
// transaction of its own) until unlock: the gateway's calls of one session
// take turns across nodes. Waiting is bounded by the statement timeout
// (EUNAVAILABLE past it); a node that dies holding it releases it with its
// connection, and one that hangs with idle_in_transaction_session_timeout.
func (s *Store) LockSession(ctx context.Context, tenant, id string) (func(), error) {
	// The row exists before the transaction that locks it: inserted
	// there, a second node's insert would wait on the first's commit
	// and then fail on the key rather than take its turn.
	if _, err := s.locks.Exec(ctx, `INSERT INTO session_locks (tenant, session_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, tenant, id); err != nil {
		return nil, dbErr(err)
	}
	tx, err := s.locks.Begin(ctx)
	if err != nil {
		return nil, dbErr(err)
	}
	var one int
	if err := tx.QueryRow(ctx, `SELECT 1 FROM session_locks WHERE tenant = $1 AND session_id = $2 FOR UPDATE`, tenant, id).Scan(&one); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return nil, dbErr(err)
	}
	return func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
}
