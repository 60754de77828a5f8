package pgstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
	"github.com/ctxd/ctxd/memory/storetest"
)

var bg = context.Background()

func TestMigrations(t *testing.T) {
	dsn := pgtest.DSN(t)
	if _, err := Open(bg, dsn, Options{NoMigrate: true}); err == nil || !strings.Contains(err.Error(), "ctxd migrate") {
		t.Fatalf("opening an empty database without migrating: %v, want a pointer to ctxd migrate", err)
	}
	s, err := Open(bg, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if n, err := s.Migrate(bg); err != nil || n != 0 {
		t.Fatalf("a second Migrate applied %d, %v; want none", n, err)
	}
	again, err := Open(bg, dsn, Options{NoMigrate: true})
	if err != nil {
		t.Fatalf("opening a current schema without migrating: %v", err)
	}
	again.Close()
	if _, err := s.pool.Exec(bg, `INSERT INTO schema_migrations (version) VALUES ($1)`, SchemaVersion()+1); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Options{{}, {NoMigrate: true}} {
		_, err := Open(bg, dsn, o)
		if memory.ErrorCode(err) != memory.EUNAVAILABLE || !strings.Contains(err.Error(), "newer than this ctxd knows") {
			t.Fatalf("opening a newer schema (%+v): %v", o, err)
		}
	}
}

// Nodes starting together on an empty database apply each migration once.
func TestMigrateConcurrently(t *testing.T) {
	dsn := pgtest.DSN(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			s, err := Open(bg, dsn, Options{})
			if err == nil {
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Two nodes (two stores on one database) appending to one session take
// turns on its row lock: seqs 1..n, exact counters, one gapless feed.
func TestTwoNodesOneSession(t *testing.T) {
	dsn := pgtest.DSN(t)
	nodes := make([]*Store, 2)
	for i := range nodes {
		s, err := Open(bg, dsn, Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		nodes[i] = s
	}
	const each = 20
	var wg sync.WaitGroup
	for n, s := range nodes {
		wg.Go(func() {
			for i := range each {
				m := storetest.Msgs(fmt.Sprintf("n%d-%d", n, i), 1)
				if _, err := s.Append(bg, "t", "s", storetest.NewSession("t", "s"), m); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	msgs, err := nodes[0].Messages(bg, "t", "s", memory.MessageQuery{})
	if err != nil || len(msgs) != 2*each {
		t.Fatalf("%d messages, %v; want %d", len(msgs), err, 2*each)
	}
	for i, m := range msgs {
		if m.Seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d", i, m.Seq)
		}
	}
	sess, _ := nodes[1].Session(bg, "t", "s")
	if sess.Tokens != 10*2*each || sess.Counts.Active != 2*each {
		t.Fatalf("session counters after two nodes wrote: %+v", sess)
	}
	changes, _ := nodes[1].Changes(bg, 0, 0)
	for i, c := range changes {
		if c.Seq != uint64(i+1) {
			t.Fatalf("change %d has seq %d: the feed has a gap", i, c.Seq)
		}
	}
}

// A write that waits on a session row another transaction holds fails
// with 503's code at the statement timeout, and stores nothing.
func TestStatementTimeout(t *testing.T) {
	dsn := pgtest.DSN(t)
	s, err := Open(bg, dsn, Options{StatementTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storeAppend := func() error {
		_, err := s.Append(bg, "t", "s", storetest.NewSession("t", "s"), storetest.Msgs(fmt.Sprint(time.Now().UnixNano()), 1))
		return err
	}
	if err := storeAppend(); err != nil {
		t.Fatal(err)
	}
	holder, err := s.pool.Begin(bg)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Rollback(bg)
	if _, err := holder.Exec(bg, `SELECT 1 FROM sessions WHERE tenant = 't' AND id = 's' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	err = storeAppend()
	if memory.ErrorCode(err) != memory.EUNAVAILABLE || !strings.Contains(err.Error(), "statement timeout") {
		t.Fatalf("a write behind a held session lock: %v, want unavailable at the statement timeout", err)
	}
	holder.Rollback(bg)
	if sess, _ := s.Session(bg, "t", "s"); sess.LastSeq != 1 {
		t.Fatalf("the timed-out write stored something: last seq %d", sess.LastSeq)
	}
}

// A database at version 6 with data (a session whose changes wait in the
// queue, settings, a numbered feed, a rate-limit bucket) migrates to the
// current schema with its data whole: the store-wide rows under the
// store-wide tenant, the feed numbered on from where it was.
func TestMigrateFromVersion6(t *testing.T) {
	dsn := pgtest.DSN(t)
	old, err := connect(bg, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if n, err := old.migrateTo(bg, 6); err != nil || n != 6 {
		t.Fatalf("migrating to version 6: %d, %v", n, err)
	}
	for _, q := range []string{
		`INSERT INTO meta (key, value) VALUES ('embed_model', 'm1'), ('embed_dim', '8')`,
		`INSERT INTO changes (tenant, seq, op, session_id, message_id) VALUES ('t', 1, 'upsert', 'gone', 'x1'), ('t', 2, 'upsert', 'gone', 'x2')`,
		`UPDATE change_counter SET seq = 2`,
		`INSERT INTO rate_limits (identity, tokens, at, allowed) VALUES ('ip:10.0.0.1', 0, now(), false)`,
	} {
		if _, err := old.pool.Exec(bg, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// A version-6 node's write: its numbering pass fails on the new
	// binary's statements, so its changes stay queued for the migration.
	if _, err := old.Append(bg, "t", "s", storetest.NewSession("t", "s"), storetest.Msgs("m", 3)); err != nil {
		t.Fatal(err)
	}

	s, err := Open(bg, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if v, err := version(bg, s.pool); err != nil || v != SchemaVersion() {
		t.Fatalf("version after Open: %d, %v", v, err)
	}
	if m, err := s.Meta(bg, "embed_model"); err != nil || m != "m1" {
		t.Fatalf("a setting after the migration: %q, %v", m, err)
	}
	if last, err := s.LastSeq(bg); err != nil || last != 5 {
		t.Fatalf("last seq %d, %v; want the 2 numbered and the 3 queued", last, err)
	}
	changes, err := s.Changes(bg, 0, 0)
	if err != nil || len(changes) != 5 || changes[4].MessageID != "m-002" || changes[4].Seq != 5 {
		t.Fatalf("the feed after the migration: %+v, %v", changes, err)
	}
	if msgs, err := s.Messages(bg, "t", "s", memory.MessageQuery{}); err != nil || len(msgs) != 3 {
		t.Fatalf("the session's messages: %d, %v", len(msgs), err)
	}
	if _, err := s.Append(bg, "t", "s", storetest.NewSession("t", "s"), storetest.Msgs("n", 1)); err != nil {
		t.Fatal(err)
	}
	if last, _ := s.LastSeq(bg); last != 6 {
		t.Fatalf("a write after the migration numbered %d, want 6", last)
	}
	// The buckets were emptied (a refill); the limiter works on the new table.
	if ok, err := s.RateLimiter(0.001, 1).Allow("ip:10.0.0.1"); !ok || err != nil {
		t.Fatalf("the emptied bucket: %v, %v", ok, err)
	}
	var tenants []string
	rows, _ := s.pool.Query(bg, `/* all tenants: the test reads the record */ SELECT DISTINCT tenant FROM schema_migrations UNION ALL SELECT DISTINCT tenant FROM meta UNION ALL SELECT tenant FROM change_counter`)
	for rows.Next() {
		var tn string
		_ = rows.Scan(&tn)
		tenants = append(tenants, tn)
	}
	if rows.Err() != nil || len(tenants) != 3 || strings.Join(tenants, "") != "" {
		t.Fatalf("tenants of the store-wide rows: %q, %v; want the store-wide one", tenants, rows.Err())
	}
}
