// Package pgtest gives tests a real PostgreSQL: one server per test
// package run, started when a test first asks for it from the machine's
// PostgreSQL binaries (initdb and pg_ctl into a temp dir, on a free
// loopback port), or the server named by CTXD_TEST_POSTGRES (a DSN) when
// it is set. Each test gets a schema of its
// own, so tests run in parallel and start empty without a CREATE DATABASE.
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//	func TestX(t *testing.T) { dsn := pgtest.DSN(t) ... }
//
// Without binaries a test skips, saying so, except in CI (CI=true), where
// it fails: CI must test the PostgreSQL backend, not skip it.
package pgtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
)

// EnvDSN names an existing server to test against instead of starting one.
const EnvDSN = "CTXD_TEST_POSTGRES"

var (
	baseDSN  string // the server's DSN, "" when there is none
	whyNone  string // why there is no server
	schemaNo atomic.Int64
	// pgctl runs pg_ctl on the server pgtest started; nil for EnvDSN's.
	pgctl func(args ...string) error
)

// Main runs the tests, then stops the server if one was started: the
// first DSN starts it (or takes EnvDSN's), so a run of tests that need
// none (go test -run X) does not pay its start.
func Main(m *testing.M) int {
	code := m.Run()
	if stop != nil {
		stop()
	}
	return code
}

var (
	once sync.Once
	stop func()
)

// DSN returns the DSN of an empty schema of the test server, dropped when
// the test ends. When there is no server it skips the test, saying why,
// except in CI (CI=true), where it fails it.
func DSN(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		var err error
		if stop, err = start(); err != nil {
			whyNone = err.Error()
		}
	})
	if baseDSN == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and no PostgreSQL to test against: %s", whyNone)
		}
		t.Skipf("no PostgreSQL to test against: %s", whyNone)
	}
	schema := fmt.Sprintf("t%d_%d", os.Getpid(), schemaNo.Add(1))
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, baseDSN)
	if err != nil {
		t.Fatalf("connect to the test server: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(ctx, baseDSN)
		if err != nil {
			t.Errorf("connect to drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return WithSearchPath(baseDSN, schema)
}

// WithSearchPath is dsn with its search_path set to schema.
func WithSearchPath(dsn, schema string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		return dsn + " search_path=" + schema
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// start sets baseDSN: EnvDSN's, or a new server's (returning its stop).
func start() (func(), error) {
	if dsn := os.Getenv(EnvDSN); dsn != "" {
		baseDSN = dsn
		return nil, nil
	}
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "ctxd-pgtest-")
	if err != nil {
		return nil, err
	}
	// PostgreSQL refuses to run as root: as root, it runs as the postgres
	// user, which must own its directory.
	var as []string
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root and there is no postgres user to run PostgreSQL as: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
		as = []string{"runuser", "-u", "postgres", "--"}
	}
	run := func(name string, args ...string) error {
		full := append(slices.Clone(as), append([]string{filepath.Join(bin, name)}, args...)...)
		out, err := exec.Command(full[0], full[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%s: %v: %s", name, err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	data := filepath.Join(dir, "data")
	// fsync is off: a test server's data is thrown away, and fsyncs would
	// be most of the suite's time. Commits still wait for their WAL to
	// reach the OS (synchronous_commit stays on), so a server stopped as a
	// crash would (Stop) keeps every acknowledged write.
	if err := run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync", "--no-instructions"); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off -c max_connections=200", port, dir)
	if err := run("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("%v\n%s", err, log)
	}
	baseDSN = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	pgctl = func(args ...string) error {
		return run("pg_ctl", append([]string{"-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "-t", "60"}, args...)...)
	}
	return func() {
		_ = run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	}, nil
}

// binDir finds the newest PostgreSQL's binaries: Debian keeps them in
// /usr/lib/postgresql/<version>/bin, off the PATH.
func binDir() (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(found, func(a, b string) int { return version(a) - version(b) })
	if len(found) > 0 {
		return filepath.Dir(found[len(found)-1]), nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("no initdb in /usr/lib/postgresql/*/bin or on the PATH (install Debian's postgresql package, or set %s to a server's DSN)", EnvDSN)
}

func version(initdb string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops the test server as a crash would (pg_ctl -m immediate); the
// test must not run in parallel with others, whose server it is too. It
// skips the test on a server pgtest did not start (EnvDSN's).
func Stop(t testing.TB) {
	t.Helper()
	if pgctl == nil {
		t.Skip("the server is " + EnvDSN + "'s: pgtest does not restart it")
	}
	if err := pgctl("-m", "immediate", "stop"); err != nil {
		t.Fatalf("stop the test server: %v", err)
	}
}

// Start starts the test server Stop stopped, on the same port.
func Start(t testing.TB) {
	t.Helper()
	if err := pgctl("start"); err != nil {
		t.Fatalf("start the test server again: %v", err)
	}
}
