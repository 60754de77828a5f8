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
	// rebuilt from them. The newest KeepEvents of a stream are kept
	// (of a tenant's stream since version 7).
	`CREATE UNLOGGED TABLE events (
		tenant text COLLATE "C" NOT NULL,
		stream text COLLATE "C" NOT NULL,
		id bigint GENERATED ALWAYS AS IDENTITY,
		body bytea NOT NULL,
		PRIMARY KEY (tenant, stream, id)
	);
	CREATE INDEX events_by_stream ON events (stream, id);`,
	// 7: every table's primary key starts with the tenant, so that the
	// schema distributes by tenant as it is. The store-wide rows (the
	// feed's counter, settings, the migrations' record) belong to the
	// store-wide tenant, '' (no tenant is named ''): the column's default,
	// so nodes of version 6 still running while new ones roll out read and
	// write them as before. Rate-limit buckets go under the caller's
	// tenant (anonymous addresses under ''): the table is emptied, which
	// refills every bucket once.
	`ALTER TABLE meta ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT '';
	ALTER TABLE meta DROP CONSTRAINT meta_pkey, ADD PRIMARY KEY (tenant, key);
	ALTER TABLE change_counter ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT '';
	ALTER TABLE change_counter DROP CONSTRAINT change_counter_pkey, ADD PRIMARY KEY (tenant);
	ALTER TABLE change_counter DROP COLUMN one;
	ALTER TABLE schema_migrations ADD COLUMN tenant text COLLATE "C" NOT NULL DEFAULT '';
	ALTER TABLE schema_migrations DROP CONSTRAINT schema_migrations_pkey, ADD PRIMARY KEY (tenant, version);
	DROP TABLE rate_limits;
	CREATE UNLOGGED TABLE rate_limits (
		tenant text COLLATE "C" NOT NULL,
		identity text COLLATE "C" NOT NULL,
		tokens double precision NOT NULL,
		at timestamptz NOT NULL,
		allowed boolean NOT NULL,
		PRIMARY KEY (tenant, identity)
	);`,
}

// storeWide is the tenant of the store's own rows (migration 7).
const storeWide = ""

// tenantColumns is the first version whose every table has the tenant
// column; the migrations' record before it has none.
const tenantColumns = 7

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int { return len(migrations) }

// Migrate applies the migrations the database lacks, each in the same
// transaction as its record, under a table lock so that nodes starting
// together apply each once. It refuses a database whose schema is newer
// than this binary's: an older node must not write to tables it does not
// know. It returns how many it applied.
func (s *Store) Migrate(ctx context.Context) (int, error) {
	return s.migrateTo(ctx, len(migrations))
}

// migrateTo applies the migrations up to version target.
func (s *Store) migrateTo(ctx context.Context, target int) (int, error) {
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
		for v := have + 1; v <= target; v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if err := recordVersion(ctx, tx, v); err != nil {
				return err
			}
			applied++
		}
		return nil
	})
	return applied, err
}

// version reads the schema's version. Binaries of every version read it
// so, before and after the record had a tenant column.
func version(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) (int, error) {
	var v int
	err := q.QueryRow(ctx, `/* all tenants: the record has no tenant column before version 7 */
		SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v)
	return v, err
}

func recordVersion(ctx context.Context, tx pgx.Tx, v int) error {
	var err error
	if v < tenantColumns {
		_, err = tx.Exec(ctx, `/* all tenants: no tenant column yet */ INSERT INTO schema_migrations (version) VALUES ($1)`, v)
	} else {
		_, err = tx.Exec(ctx, `INSERT INTO schema_migrations (tenant, version) VALUES ($1, $2)`, storeWide, v)
	}
	return err
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
