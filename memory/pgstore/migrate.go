package pgstore

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
)

// migrations are the schema's versions, in order: migration i+1 is
// migrations[i]. Applied ones never change; a change of schema is a new
// entry. Text keys are COLLATE "C": sessions list in byte order, as the
// embedded store lists them, whatever the database's locale.
var migrations = []string{
	`CREATE TABLE sessions (
		tenant text COLLATE "C" NOT NULL,
		id text COLLATE "C" NOT NULL,
		body bytea NOT NULL,
		PRIMARY KEY (tenant, id)
	);
	CREATE TABLE messages (
		tenant text COLLATE "C" NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		seq bigint NOT NULL,
		id text COLLATE "C" NOT NULL,
		state text NOT NULL,
		role text NOT NULL,
		kind text NOT NULL,
		created_at bigint NOT NULL,
		body bytea NOT NULL,
		vector bytea,
		PRIMARY KEY (tenant, session_id, seq)
	);
	CREATE UNIQUE INDEX messages_by_id ON messages (tenant, id);
	CREATE INDEX messages_by_state ON messages (tenant, session_id, state, seq);
	CREATE TABLE client_ids (
		tenant text COLLATE "C" NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		client_id text COLLATE "C" NOT NULL,
		message_id text COLLATE "C" NOT NULL,
		PRIMARY KEY (tenant, session_id, client_id)
	);
	CREATE TABLE write_keys (
		tenant text COLLATE "C" NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		key text COLLATE "C" NOT NULL,
		at bigint NOT NULL,
		body bytea NOT NULL,
		PRIMARY KEY (tenant, session_id, key)
	);
	CREATE TABLE changes (
		tenant text COLLATE "C" NOT NULL,
		seq bigint NOT NULL,
		op text NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		message_id text COLLATE "C" NOT NULL,
		PRIMARY KEY (tenant, seq)
	);
	CREATE INDEX changes_by_seq ON changes (seq);
	CREATE TABLE change_counter (
		one boolean PRIMARY KEY DEFAULT true CHECK (one),
		seq bigint NOT NULL
	);
	INSERT INTO change_counter (one, seq) VALUES (true, 0);
	CREATE TABLE meta (
		key text COLLATE "C" PRIMARY KEY,
		value text NOT NULL
	);`,
	// 2: writes no longer number their changes themselves (the counter's
	// row lock, held to commit, ordered every write of the database one
	// behind the other): each queues them, and a numbering pass moves what
	// is committed into the feed (see the package comment).
	`CREATE TABLE change_queue (
		tenant text COLLATE "C" NOT NULL,
		id bigint GENERATED ALWAYS AS IDENTITY,
		op text NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		message_id text COLLATE "C" NOT NULL,
		PRIMARY KEY (tenant, id)
	);`,
	// 3: the API's rate limits, shared by the nodes: a bucket per caller
	// (a key's hash or a client address; store-wide, as meta). UNLOGGED:
	// no WAL and no fsync for a row every request touches, and a crash
	// that empties it only refills everyone's bucket.
	`CREATE UNLOGGED TABLE rate_limits (
		identity text COLLATE "C" PRIMARY KEY,
		tokens double precision NOT NULL,
		at timestamptz NOT NULL,
		allowed boolean NOT NULL
	);`,
	// 4: a row per gateway session that the gateway's calls lock (FOR
	// UPDATE), so that two nodes' calls of one session take turns: the
	// session's own row cannot be it, the writes inside a call lock that.
	`CREATE TABLE session_locks (
		tenant text COLLATE "C" NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		PRIMARY KEY (tenant, session_id)
	);`,
	// 5: each session's last window layout, so that the node that builds
	// its next window extends the same one (memory's window_shared.go).
	// UNLOGGED: a hint for the provider's prompt cache, which a crash
	// that empties it costs one window built afresh a session.
	`CREATE UNLOGGED TABLE window_layouts (
		tenant text COLLATE "C" NOT NULL,
		session_id text COLLATE "C" NOT NULL,
		body bytea NOT NULL,
		PRIMARY KEY (tenant, session_id)
	);`,
	// 6: the event log (compactions, drops, recoveries...), which every
	// node writes and any reads back: a node's own files showed a client
	// only the events of the node it happened to ask. UNLOGGED, as the
	// embedded log's lines are not fsynced: they explain, nothing is
	// rebuilt from them. The newest KeepEvents of a stream are kept.
	`CREATE UNLOGGED TABLE events (
		tenant text COLLATE "C" NOT NULL,
		stream text COLLATE "C" NOT NULL,
		id bigint GENERATED ALWAYS AS IDENTITY,
		body bytea NOT NULL,
		PRIMARY KEY (tenant, stream, id)
	);
	CREATE INDEX events_by_stream ON events (stream, id);`,
}

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations) }

// Migrate applies the migrations the database lacks, each in the same
// transaction as its record, under a table lock so that nodes starting
// together apply each once. It refuses a database whose schema is newer
// than this binary's: an older node must not write to tables it does not
// know. It returns how many it applied.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	// Two nodes creating the table at once: one of them gets a unique
	// violation on the catalog; the table is there all the same.
	create := `CREATE TABLE IF NOT EXISTS schema_migrations (version int PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`
	if _, err := s.pool.Exec(ctx, create); err != nil {
		if _, err := s.pool.Exec(ctx, create); err != nil {
			return 0, fmt.Errorf("create schema_migrations: %w", dbErr(err))
		}
	}
	applied := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `LOCK TABLE schema_migrations IN EXCLUSIVE MODE`); err != nil {
			return err
		}
		have, err := version(ctx, tx)
		if err != nil {
			return err
		}
		if err := refuseNewer(have); err != nil {
			return err
		}
		for v := have + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, v); err != nil {
				return err
			}
			applied++
		}
		return nil
	})
	return applied, err
}

func version(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v int
	err := q.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func refuseNewer(have int) error {
	if have > len(migrations) {
		return memory.Errorf(memory.EUNAVAILABLE, "the database's schema is version %d, newer than this ctxd knows (%d): upgrade ctxd", have, len(migrations))
	}
	return nil
}

// checkSchema fails unless the schema is exactly this binary's.
func (s *Store) checkSchema(ctx context.Context) error {
	have, err := version(ctx, s.pool)
	if err != nil {
		return fmt.Errorf("read schema version (run ctxd migrate): %w", dbErr(err))
	}
	if err := refuseNewer(have); err != nil {
		return err
	}
	if have < len(migrations) {
		return memory.Errorf(memory.EUNAVAILABLE, "the database's schema is version %d, this ctxd needs %d: run ctxd migrate", have, len(migrations))
	}
	return nil
}
