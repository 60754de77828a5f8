// Package clitest runs a cobra command line in process for the tests of
// ctxd's commands, as their main does, and reads what it printed.
package clitest

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Result is one run of a command line.
type Result struct {
	Out, Err string
	Code     int
}

// Run runs root with args, stdin read from in (nil: empty), and returns
// what it printed and the exit code report gives its error (report prints
// the error on the writer it is handed, as main does on stderr).
func Run(t testing.TB, root *cobra.Command, report func(io.Writer, error) int, in io.Reader, args ...string) Result {
	t.Helper()
	if in == nil {
		in = strings.NewReader("")
	}
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(&out)
	root.SetErr(&errb)
	code := report(&errb, root.ExecuteContext(t.Context()))
	return Result{Out: out.String(), Err: errb.String(), Code: code}
}

// DecodeJSON decodes output that must be one JSON object.
func DecodeJSON(t testing.TB, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not a JSON object: %v\n%s", err, s)
	}
	return v
}

// Lines splits output into its non-empty lines.
func Lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}
