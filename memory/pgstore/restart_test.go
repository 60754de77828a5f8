package pgstore

import (
	"fmt"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
	"github.com/ctxd/ctxd/memory/storetest"
)

// While PostgreSQL is down, writes and reads fail as unavailable (the API's
// 503 with Retry-After), not as internal errors; once it is back, the same
// store reconnects by itself, and every write acknowledged before the
// crash is there.
func TestDatabaseRestart(t *testing.T) {
	s := openTest(t)
	appendOne := func(i int) error {
		_, err := s.Append(bg, "t", "s", storetest.NewSession("t", "s"), storetest.Msgs(fmt.Sprintf("m%d", i), 1))
		return err
	}
	for i := range 3 {
		if err := appendOne(i); err != nil {
			t.Fatal(err)
		}
	}
	pgtest.Stop(t)
	restarted := false
	defer func() {
		if !restarted {
			pgtest.Start(t)
		}
	}()
	if err := appendOne(3); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("a write while the database is down: %v (code %s), want unavailable", err, memory.ErrorCode(err))
	}
	if _, err := s.Messages(bg, "t", "s", memory.MessageQuery{}); memory.ErrorCode(err) != memory.EUNAVAILABLE {
		t.Fatalf("a read while the database is down: %v, want unavailable", err)
	}
	pgtest.Start(t)
	restarted = true
	if err := appendOne(4); err != nil {
		t.Fatalf("a write after the restart: %v", err)
	}
	msgs, err := s.Messages(bg, "t", "s", memory.MessageQuery{})
	if err != nil || len(msgs) != 4 {
		t.Fatalf("after the restart: %d messages, %v; want the 3 acknowledged before and 1 after", len(msgs), err)
	}
}
