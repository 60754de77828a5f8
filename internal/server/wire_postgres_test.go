package server_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/server/servertest"
	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// TestCoreOnPostgres runs the core of the wire tests again with their
// servers on PostgreSQL (servertest.PostgresFor reads the test's name). A subset, to
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

// postgresEvents reads the event log stream of the server on dir from its
// database, every tenant's events oldest first; ok is false for a server
// on an embedded store.
func postgresEvents(t *testing.T, dir, stream string) (_ []api.Event, ok bool) {
	t.Helper()
	dsn, pg := servertest.OnPostgres(dir)
	if !pg {
		return nil, false
	}
	st, err := pgstore.Open(context.Background(), dsn, pgstore.Options{NoMigrate: true})
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
