package main

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/ctxd/ctxd/client"
	"github.com/ctxd/ctxd/internal/clitest"
	"github.com/ctxd/ctxd/internal/server/servertest"
)

// testServer is the real server (servertest) on loopback, for the eval and
// the bench to measure.
type testServer struct {
	URL string
	api *client.Client
}

func startServer(t testing.TB, dir string) *testServer {
	t.Helper()
	url, _ := servertest.Start(t, dir)
	c, err := client.New(url)
	if err != nil {
		t.Fatal(err)
	}
	return &testServer{URL: url, api: c}
}

// sessionStatus is GET /v1/sessions/{id} as JSON reads it (numbers float64).
func (ts *testServer) sessionStatus(t testing.TB, id string) map[string]any {
	t.Helper()
	st, err := ts.api.Session(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSON(t, string(b))
}

// runCLI runs ctxd-bench in process as main does, with stdin read from in.
func runCLI(t testing.TB, in io.Reader, args ...string) clitest.Result {
	t.Helper()
	return clitest.Run(t, newRootCmd(), report, in, args...)
}

// cli runs a verb against ts; it fails t unless the exit code is want.
func (ts *testServer) cli(t testing.TB, want int, args ...string) clitest.Result {
	t.Helper()
	r := runCLI(t, nil, append(args, "--server", ts.URL)...)
	if r.Code != want {
		t.Fatalf("ctxd-bench %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), r.Code, want, r.Out, r.Err)
	}
	return r
}

var (
	decodeJSON = clitest.DecodeJSON
	lines      = clitest.Lines
)
