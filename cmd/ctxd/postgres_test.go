package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/ctxd/ctxd/memory/pgstore/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// The move from an embedded data dir to PostgreSQL and back, each one
// command line (export to stdout, piped into import from stdin): the
// server on PostgreSQL answers exactly as the data dir did (sessions,
// every message in every state, cold storage, four kinds of search), and
// the export of the data dir made from PostgreSQL is the original export.
func TestMoveToPostgresAndBack(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	src, back := t.TempDir(), t.TempDir()
	ts := startServer(t, src)
	populate(t, ts)
	want := answers(t, ts)
	ts.Stop()

	file := filepath.Join(t.TempDir(), "all.jsonl")
	mustRun(t, "export", "--data-dir", src, "--all", "--vectors", "--out", file)
	orig, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// export ... --out - | ctxd import --store DSN -
	r := runCLI(t, bytes.NewReader(orig), "import", "--store", dsn, "--data-dir", t.TempDir(), "-")
	if r.Code != 0 || !strings.Contains(r.Out, "imported 3 sessions") || !strings.Contains(r.Out, "0 embedded") {
		t.Fatalf("import into PostgreSQL: exit %d\n%s\n%s", r.Code, r.Out, r.Err)
	}
	if _, _, err := runCtxd(t, "import", "--store", dsn, "--data-dir", t.TempDir(), file); err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("a second import into PostgreSQL: %v, want a refusal naming --replace", err)
	}

	pg := startServer(t, t.TempDir(), func(c *Config) { c.Store = dsn })
	// A new node answers while it builds its index, a search across
	// sessions with a 503 until then: compare once it is built.
	if err := pg.Main.Service.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := answers(t, pg); got != want {
		t.Fatalf("the server on PostgreSQL answers differently\nwant: %s\ngot:  %s", want, got)
	}
	pg.Stop()

	// export --store DSN --out - | ctxd import --data-dir BACK -
	r = runCLI(t, nil, "export", "--store", dsn, "--data-dir", t.TempDir(), "--all", "--vectors", "--out", "-")
	if r.Code != 0 {
		t.Fatalf("export from PostgreSQL: exit %d\n%s", r.Code, r.Err)
	}
	if _, rest, _ := strings.Cut(r.Out, "\n"); rest != withoutHeader(t, file) {
		t.Fatal("the export from PostgreSQL differs from the data dir's")
	}
	if r := runCLI(t, strings.NewReader(r.Out), "import", "--data-dir", back, "-"); r.Code != 0 {
		t.Fatalf("import back into a data dir: exit %d\n%s", r.Code, r.Err)
	}
	if out := mustRun(t, "verify", "--data-dir", back); !strings.Contains(out, "consistent") {
		t.Fatalf("verify after the move back: %s", out)
	}
	again := filepath.Join(t.TempDir(), "again.jsonl")
	mustRun(t, "export", "--data-dir", back, "--all", "--vectors", "--out", again)
	if withoutHeader(t, again) != withoutHeader(t, file) {
		t.Fatal("the data dir moved back exports differently from the original")
	}
}

// ctxd migrate brings a new database to the schema, then finds nothing to
// do; it refuses the embedded store, which has no migrations.
func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	if out := mustRun(t, "migrate", "--store", dsn); strings.TrimSpace(out) != fmt.Sprintf("schema at version %d", pgstore.SchemaVersion()) {
		t.Fatalf("migrate of a new database said %q", out)
	}
	if out := mustRun(t, "migrate", "--store", dsn); !strings.Contains(out, "nothing to apply") {
		t.Fatalf("a second migrate said %q", out)
	}
	if _, _, err := runCtxd(t, "migrate", "--data-dir", t.TempDir()); err == nil || !strings.Contains(err.Error(), "postgres://") {
		t.Fatalf("migrate without --store: %v", err)
	}
}
