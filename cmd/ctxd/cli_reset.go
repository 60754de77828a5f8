package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ctxd/ctxd/memory"
	"github.com/spf13/cobra"
)

func newResetCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "reset",
		Short: "Delete every session the API key can see",
		Long: "Delete every session the caller may see, with all their messages, index entries and cold storage. " +
			"It asks first on the terminal; --force skips the question (needed when stdin is not a terminal).",
		Example: "  ctxd reset\n  ctxd reset --force --server http://10.0.0.5:8080",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&force, "force", false, "delete without asking")
	return clientVerb(cmd, func(v *verb, _ []string) error {
		sessions, err := v.allSessions()
		if err != nil {
			return err
		}
		if len(sessions) == 0 {
			if v.json {
				return v.printJSON(map[string]any{"deleted": []string{}})
			}
			fmt.Fprintln(v.out, "no sessions to delete")
			return nil
		}
		if !force {
			if err := confirm(v.in, v.errw, len(sessions), v.api.BaseURL()); err != nil {
				return err
			}
		}
		deleted := []string{}
		for _, s := range sessions {
			err := v.api.DeleteSession(v.ctx, s.ID)
			if memory.ErrorCode(err) == memory.ENOTFOUND {
				continue // deleted meanwhile by someone else: the goal is reached
			}
			if err != nil {
				return fmt.Errorf("delete session %s (%d of %d deleted so far): %w", s.ID, len(deleted), len(sessions), err)
			}
			deleted = append(deleted, s.ID)
		}
		if v.json {
			return v.printJSON(map[string]any{"deleted": deleted})
		}
		fmt.Fprintf(v.out, "deleted %d sessions\n", len(deleted))
		return nil
	})
}

// confirm asks on errw and reads the answer from in. Only "yes" goes on; a
// stdin that is a file or a pipe is not a person, so nothing is asked.
func confirm(in io.Reader, errw io.Writer, n int, server string) error {
	if f, ok := in.(*os.File); ok && !isTerminal(f) {
		return &abortedError{msg: fmt.Sprintf("refusing to delete %d sessions without confirmation: stdin is not a terminal; add --force", n)}
	}
	fmt.Fprintf(errw, "Delete %d sessions and everything in them from %s? Type 'yes' to confirm: ", n, server)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("read confirmation: %w", err)
	}
	if strings.TrimSpace(answer) != "yes" {
		if !strings.HasSuffix(answer, "\n") {
			fmt.Fprintln(errw) // end the question's line
		}
		return &abortedError{msg: "aborted: nothing deleted"}
	}
	return nil
}

// isTerminal reports whether f is a character device, as a terminal is.
// /dev/null is one too, but reading it gives an empty answer, which aborts.
func isTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}
