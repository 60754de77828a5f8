package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// TestCoreOnPostgres runs the core of the wire tests again with their
// servers on PostgreSQL (startServer reads the test's name). A subset, to
// keep `make test` short: the rest is the same code above the memory.Store
// both backends pass the contract of. cmd/ctxd's TestCoreOnPostgres runs
// the core of the tests that stayed there.
func TestCoreOnPostgres(t *testing.T) {
	pgtest.DSN(t) // skips (or fails, in CI) here when there is no server
	for _, c := range []struct {
		name string
		fn   func(*testing.T)
	}{
		{"StoreRestartSearch", TestStoreRestartSearch},
		{"SessionsAPI", TestSessionsAPI},
		{"MessagesPaging", TestMessagesPaging},
		{"SearchFilters", TestSearchFilters},
		{"DeleteIsolation", TestDeleteIsolation},
		{"ContextExactBudgetAndValidSequence", TestContextExactBudgetAndValidSequence},
		{"ContextRecoversRelevantColdTurns", TestContextRecoversRelevantColdTurns},
		{"AutoCompactionUnderBudget", TestAutoCompactionUnderBudget},
		{"CompactDryRunAndProtection", TestCompactDryRunAndProtection},
		{"RecoverAndFlush", TestRecoverAndFlush},
		{"IdempotencyKey", TestIdempotencyKey},
		{"IdempotencyKeyConcurrentRetries", TestIdempotencyKeyConcurrentRetries},
		{"ClientMessageIDs", TestClientMessageIDs},
		{"GatewayOpenAIStoresResentHistoryOnce", TestGatewayOpenAIStoresResentHistoryOnce},
		{"GatewayOpenAIDivergedHistorySupersedesTail", TestGatewayOpenAIDivergedHistorySupersedesTail},
	} {
		t.Run(c.name, c.fn)
	}
}

const corePrefix = "TestCoreOnPostgres/"

// pgDirs maps a test server's data dir to its PostgreSQL schema, so that
// a test restarting its server on the same dir finds its data again.
var pgDirs sync.Map

// postgresFor is the store of a server that a test under
// TestCoreOnPostgres starts on dir ("" for any other test).
func postgresFor(t testing.TB, dir string) string {
	if !strings.HasPrefix(t.Name(), corePrefix) {
		return ""
	}
	if dsn, ok := pgDirs.Load(dir); ok {
		return dsn.(string)
	}
	dsn, _ := pgDirs.LoadOrStore(dir, pgtest.DSN(t))
	return dsn.(string)
}

// hasMirror reports whether the server on dir keeps a cold mirror there:
// not on PostgreSQL, where the cold originals are rows of the database.
func hasMirror(dir string) bool {
	_, pg := pgDirs.Load(dir)
	return !pg
}

// postgresEvents reads the event log stream of the server on dir from its
// database, every tenant's events oldest first; ok is false for a server
// on an embedded store.
func postgresEvents(t *testing.T, dir, stream string) (_ []api.Event, ok bool) {
	t.Helper()
	dsn, pg := pgDirs.Load(dir)
	if !pg {
		return nil, false
	}
	st, err := pgstore.Open(context.Background(), dsn.(string), pgstore.Options{NoMigrate: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	evs, err := st.Events(nil).Tail(stream, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]api.Event, len(evs))
	for i, e := range evs {
		b, _ := json.Marshal(e)
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatal(err)
		}
	}
	return out, true
}

// checkOnPostgres fails a test that was to run on PostgreSQL and whose
// server wrote an embedded store instead.
func checkOnPostgres(t testing.TB, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "ctxd.db")); err == nil {
		t.Fatalf("%s: the server wrote an embedded store in %s, not to PostgreSQL", t.Name(), dir)
	}
}
