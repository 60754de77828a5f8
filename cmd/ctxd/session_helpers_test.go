// Helpers that read a session's messages and event logs, for the
// process-level tests (compaction's own rules are tested in internal/server).

package main

import (
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/memorytest"
	"github.com/ctxd/ctxd/internal/server/servertest"
)

// chatter is filler in the shape of a real conversation turn.
var chatter = memorytest.Chatter

// allMessages is every message of session, in every state, oldest first.
func allMessages(ts *testServer, session string) []api.Message {
	ts.t.Helper()
	return servertest.Messages(ts.t, ts.URL, ts.Header, session)
}

// checkReachable asserts invariant 1: every acknowledged id is retrievable,
// in the window or cold, and a summarized one is listed in a summary's sources.
func checkReachable(t *testing.T, ts *testServer, session string, acked []string) {
	t.Helper()
	servertest.CheckReachable(t, allMessages(ts.on(t), session), acked)
}
