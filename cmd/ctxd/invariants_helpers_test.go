package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory"
)

// checkCounters asserts the session status agrees with its messages: counts
// per state, summaries, and no id twice.
func checkCounters(t *testing.T, ts *testServer, session string) []api.Message {
	t.Helper()
	// Background compactions may still run (queued behind the compaction
	// bound): wait for them in process; a child process's are read on both
	// sides of the status until they agree.
	if ts.Main != nil {
		if err := ts.Main.Service.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []api.Message
	var st *memory.Status
	for range 100 {
		msgs = allMessages(ts, session)
		st = servertest.Status(t, ts.URL, ts.Header, session)
		if fmt.Sprint(allMessages(ts, session)) == fmt.Sprint(msgs) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	servertest.CheckCounters(t, st, msgs)
	return msgs
}
