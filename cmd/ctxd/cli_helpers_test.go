package main

import (
	"io"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/internal/clitest"
)

// cliResult is one run of the binary's command line.
type cliResult = clitest.Result

// runCLI runs the ctxd command line in process as main does, with stdin
// read from in, and returns what it printed and its exit code.
func runCLI(t testing.TB, in io.Reader, args ...string) cliResult {
	t.Helper()
	return clitest.Run(t, newRootCmd(), reportError, in, args...)
}

// cli runs a client verb against ts; it fails t unless the exit code is want.
func (ts *testServer) cli(t testing.TB, want int, args ...string) cliResult {
	t.Helper()
	return ts.cliIn(t, want, nil, args...)
}

func (ts *testServer) cliIn(t testing.TB, want int, in io.Reader, args ...string) cliResult {
	t.Helper()
	r := runCLI(t, in, append(args, "--server", ts.URL)...)
	if r.Code != want {
		t.Fatalf("ctxd %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, want, r.Out, r.Err)
	}
	return r
}

var (
	decodeJSON = clitest.DecodeJSON
	lines      = clitest.Lines
)

// setPageSize makes listings page every n items for one test.
func setPageSize(t *testing.T, n int) {
	old := listPageSize
	listPageSize = n
	t.Cleanup(func() { listPageSize = old })
}

// sessionStatus is GET /v1/sessions/{id}.
func (ts *testServer) sessionStatus(id string) map[string]any {
	ts.t.Helper()
	return ts.mustDo(200, "GET", "/v1/sessions/"+id, nil)
}
