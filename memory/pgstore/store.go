// Package pgstore is memory.Store on PostgreSQL: the system of record that
// several ctxd nodes share.
//
// Every table's primary key starts with the tenant and every query names
// it, so the schema can be distributed by tenant (Citus and the like) as
// it is. The store's own rows (the change feed's counter, settings, the
// migrations' record, anonymous callers' rate limits) belong to the
// store-wide tenant, the empty name (storeWide). The statements that read
// or write across tenants say so in a leading comment, /* all tenants:
// why */: following the change feed, numbering it, scans of the whole
// store (index builds, export, verify) and expiries; a distributed engine
// runs them on every shard (schema_test.go checks both rules).
//
// Writes to one session are serialized by a row lock on the session
// (SELECT ... FOR UPDATE), held by the write's transaction: two nodes
// appending to one session take turns, and a node that dies mid-write
// leaves nothing locked (its connection closes and the transaction rolls
// back). No advisory locks: engines that speak PostgreSQL's protocol but
// distribute it do not all have them.
//
// The change feed's numbering is in feed.go.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Defaults of Options.
const (
	// DefaultStatementTimeout bounds every statement: a query stuck behind
	// a lock or a slow disk fails (503, retry) rather than holding a
	// request and a connection without end.
	DefaultStatementTimeout = 30 * time.Second
	// DefaultIdleInTransaction ends a transaction whose client stopped
	// talking (a hung node), releasing its session's row lock.
	DefaultIdleInTransaction = time.Minute
	// DefaultKeepChanges is how many of the newest change-feed entries a
	// trim keeps: several nodes follow one feed and one node's index does
	// not say what the others have. A node further behind rebuilds its
	// index from the tables.
	DefaultKeepChanges = 100_000
)

// Options tune a Store; zero values take the defaults.
type Options struct {
	StatementTimeout time.Duration
	KeepChanges      uint64
	// NoMigrate opens a database whose schema is already current, and
	// fails if it is not (ctxd migrate applies migrations alone).
	NoMigrate bool
}

// Store is a memory.Store on PostgreSQL.
type Store struct {
	pool    *pgxpool.Pool
	locks   *pgxpool.Pool // LockSession's connections (locks.go)
	keep    uint64
	numbers numbers
}

var (
	_ memory.Store         = (*Store)(nil)
	_ memory.DamageScanner = (*Store)(nil)
)

// Open connects to the database at dsn (a postgres:// URL or key=value
// string), applies the migrations it lacks and refuses a schema newer than
// this binary knows.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	s, err := connect(ctx, dsn, opts)
	if err != nil {
		return nil, err
	}
	if opts.NoMigrate {
		err = s.checkSchema(ctx)
	} else {
		_, err = s.Migrate(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// connect opens the pools, leaving the schema as it is.
func connect(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, memory.Errorf(memory.EINVALID, "store: %v", err)
	}
	if opts.StatementTimeout <= 0 {
		opts.StatementTimeout = DefaultStatementTimeout
	}
	if opts.KeepChanges == 0 {
		opts.KeepChanges = DefaultKeepChanges
	}
	rp := cfg.ConnConfig.RuntimeParams
	if _, set := rp["statement_timeout"]; !set {
		rp["statement_timeout"] = fmt.Sprint(opts.StatementTimeout.Milliseconds())
	}
	if _, set := rp["idle_in_transaction_session_timeout"]; !set {
		rp["idle_in_transaction_session_timeout"] = fmt.Sprint(DefaultIdleInTransaction.Milliseconds())
	}
	rp["application_name"] = "ctxd"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, dbErr(err)
	}
	// Its own pool, dialled when a lock is first taken: a call holding a
	// lock's connection needs others for its writes, and with one pool
	// enough calls at once would hold every connection and wait for ever.
	locks, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		pool.Close()
		return nil, dbErr(err)
	}
	s := &Store{pool: pool, locks: locks, keep: opts.KeepChanges}
	if err := pool.Ping(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("connect to %s: %w", redact(cfg), dbErr(err))
	}
	return s, nil
}

func redact(cfg *pgxpool.Config) string {
	c := cfg.ConnConfig
	return fmt.Sprintf("postgres://%s@%s:%d/%s", c.User, c.Host, c.Port, c.Database)
}

// Close closes the connections.
func (s *Store) Close() error {
	s.pool.Close()
	s.locks.Close()
	return nil
}

// dbErr translates the database's errors into the domain's codes: what a
// retry may fix (connection lost, server restarting, statement timeout,
// serialization) is EUNAVAILABLE, which the API answers with 503 and
// Retry-After; a unique key taken is ECONFLICT.
func dbErr(err error) error {
	if err == nil {
		return nil
	}
	var me *memory.Error
	var dr *memory.DamagedRecord
	if errors.As(err, &me) || errors.As(err, &dr) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return memory.Errorf(memory.EUNAVAILABLE, "request cancelled: %v", err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "23505":
			return memory.Errorf(memory.ECONFLICT, "%s exists already (%s)", what(pe), pe.ConstraintName)
		case pe.Code == "57014":
			return memory.Errorf(memory.EUNAVAILABLE, "the database did not answer within the statement timeout: %s", pe.Message)
		case pe.Code == "40001" || pe.Code == "40P01" || pe.Code == "55P03":
			return memory.Errorf(memory.EUNAVAILABLE, "the database refused a concurrent write, retry it: %s", pe.Message)
		case len(pe.Code) == 5 && (pe.Code[:2] == "08" || pe.Code[:2] == "57" || pe.Code[:2] == "53"):
			return memory.Errorf(memory.EUNAVAILABLE, "the database is unavailable: %s", pe.Message)
		}
		return fmt.Errorf("database: %w", err)
	}
	// A connection the server closed (restart, crash, failover) reads
	// as a closed conn or a cut stream: the pool dials anew for the retry.
	var ne net.Error
	if errors.As(err, &ne) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, pgx.ErrTxClosed) ||
		errors.Is(err, pgconn.ErrConnClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return memory.Errorf(memory.EUNAVAILABLE, "the database is unreachable: %v", err)
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return memory.Errorf(memory.EUNAVAILABLE, "the database is unreachable: %v", err)
	}
	return fmt.Errorf("database: %w", err)
}

func what(pe *pgconn.PgError) string {
	switch pe.TableName {
	case "sessions":
		return "the session"
	case "messages":
		return "a message id"
	}
	return "a key"
}

func ctxErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return memory.Errorf(memory.EUNAVAILABLE, "request cancelled: %v", err)
	}
	return nil
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return s.inTxWith(ctx, pgx.TxOptions{}, fn)
}

func (s *Store) inTxWith(ctx context.Context, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	if err := ctxErr(ctx); err != nil {
		return err
	}
	tx, err := s.pool.BeginTx(ctx, opts)
	if err != nil {
		return dbErr(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := fn(tx); err != nil {
		return dbErr(err)
	}
	return dbErr(tx.Commit(ctx))
}
