package pgstore

import (
	"context"
	"errors"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

var _ memory.LayoutStore = (*Store)(nil)

// Layout is the session's last window layout; nil when none is kept.
func (s *Store) Layout(ctx context.Context, tenant, session string) ([]byte, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT body FROM window_layouts WHERE tenant = $1 AND session_id = $2`, tenant, session).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return b, dbErr(err)
}

// PutLayout keeps the session's last window layout, replacing the one
// before (the last node to build a window wins: either is a layout of the
// session that the next window checks before it extends it).
func (s *Store) PutLayout(ctx context.Context, tenant, session string, layout []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO window_layouts (tenant, session_id, body) VALUES ($1, $2, $3)
		ON CONFLICT (tenant, session_id) DO UPDATE SET body = excluded.body`, tenant, session, layout)
	return dbErr(err)
}
