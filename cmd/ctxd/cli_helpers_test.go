package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// cliResult is one run of the binary's command line.
type cliResult struct {
	Out, Err string
	Code     int
}

// runCLI runs the ctxd command line in process as main does, with stdin
// read from in, and returns what it printed and its exit code.
func runCLI(t testing.TB, in io.Reader, args ...string) cliResult {
	t.Helper()
	if in == nil {
		in = strings.NewReader("")
	}
	root := newRootCmd()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := reportError(&errb, root.ExecuteContext(t.Context()))
	return cliResult{Out: out.String(), Err: errb.String(), Code: code}
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

func decodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, s)
	}
	return v
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

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
