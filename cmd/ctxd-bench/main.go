// Command ctxd-bench measures ctxd: the LoCoMo evaluation and the replay of
// recorded coding-agent runs (eval), the load bench (bench), and the README's
// table of figures (figures). It is a client of a ctxd server: one it runs
// in its own process on a temporary data dir, a child `ctxd serve` (the
// binary named by --ctxd), or a running one (--server).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(report(os.Stderr, newRootCmd().ExecuteContext(context.Background())))
}

// report prints err for a person and returns the exit code.
func report(w io.Writer, err error) int {
	if err != nil {
		fmt.Fprintln(w, "ctxd-bench:", err)
	}
	return exitCode(err)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "ctxd-bench",
		Short:         "ctxd-bench: ctxd's evaluation, load bench and README figures",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newEvalCmd(), newBenchCmd(), newFiguresCmd(), newSampleCmd(), newBalanceCmd())
	return root
}

// Exit codes: as ctxd's for the same failures.
const (
	exitOK     = 0
	exitFailed = 1 // the run failed
	exitUsage  = 2 // bad flags or arguments
)

// usageError is a mistake in how the command was called.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// exitCode maps an error to the process's exit code. Cobra's own errors
// (an unknown verb or flag) have no type: they are told by their words.
func exitCode(err error) int {
	var usage *usageError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &usage):
		return exitUsage
	}
	for _, p := range []string{"unknown command ", "required flag(s) ", "unknown flag", "unknown shorthand flag", "invalid argument "} {
		if strings.HasPrefix(err.Error(), p) {
			return exitUsage
		}
	}
	return exitFailed
}
