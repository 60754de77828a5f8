package servertest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

// A package's core tests run again on PostgreSQL under a test named
// CorePrefix (its TestCoreOnPostgres): the servers they start on a data dir
// use a database of their own for their store, and find it again when the
// test restarts a server on the same dir.

// CorePrefix starts the name of every test whose servers run on PostgreSQL.
const CorePrefix = "TestCoreOnPostgres/"

// pgDirs maps a test server's data dir to its PostgreSQL schema.
var pgDirs sync.Map

// PostgresFor is the store of a server that a test under CorePrefix starts
// on dir ("" for any other test: the embedded store).
func PostgresFor(t testing.TB, dir string) string {
	if !strings.HasPrefix(t.Name(), CorePrefix) {
		return ""
	}
	if dsn, ok := pgDirs.Load(dir); ok {
		return dsn.(string)
	}
	dsn, _ := pgDirs.LoadOrStore(dir, pgtest.DSN(t))
	return dsn.(string)
}

// OnPostgres is the store of the servers started on dir, when they run on
// PostgreSQL.
func OnPostgres(dir string) (dsn string, ok bool) {
	v, ok := pgDirs.Load(dir)
	if !ok {
		return "", false
	}
	return v.(string), true
}

// HasMirror reports whether the server on dir keeps a cold mirror there:
// not on PostgreSQL, where the cold originals are rows of the database.
func HasMirror(dir string) bool {
	_, pg := OnPostgres(dir)
	return !pg
}

// CheckOnPostgres fails a test that was to run on PostgreSQL and whose
// server wrote an embedded store instead.
func CheckOnPostgres(t testing.TB, dir string) {
	if _, err := os.Stat(filepath.Join(dir, "ctxd.db")); err == nil {
		t.Fatalf("%s: the server wrote an embedded store in %s, not to PostgreSQL", t.Name(), dir)
	}
}
