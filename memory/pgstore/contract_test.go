package pgstore

import (
	"context"
	"os"
	"testing"

	"github.com/ctxd/ctxd/memory"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
	"github.com/ctxd/ctxd/memory/storetest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// openTest opens a store on an empty schema of the test server.
func openTest(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), pgtest.DSN(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestContract runs the rules every memory.Store keeps (memory/storetest)
// against PostgreSQL.
func TestContract(t *testing.T) {
	storetest.Run(t, storetest.Backend{
		Open: func(t *testing.T) memory.Store { return openTest(t) },
		Damage: func(t *testing.T, st memory.Store, tenant, session, id string) {
			_, err := st.(*Store).pool.Exec(context.Background(), `UPDATE messages SET body = '\x7b0000'::bytea WHERE tenant = $1 AND session_id = $2 AND id = $3`, tenant, session, id)
			if err != nil {
				t.Fatal(err)
			}
		},
	})
}
