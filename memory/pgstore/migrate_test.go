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
