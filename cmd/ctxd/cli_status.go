package main

import (
	"fmt"

	"github.com/ctxd/ctxd/internal/numfmt"
	"github.com/ctxd/ctxd/memory"
	"github.com/spf13/cobra"
)

func newStatusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [SESSION]",
		Short: "Show how full each session's context window is",
		Long: "Show a context-health gauge: tokens in the working window against the context window, " +
			"the window's state (ok, flush_due, compaction_due, over_limit), messages by state and compactions. " +
			"Without SESSION, one line per session.",
		Example: "  ctxd status demo\n  ctxd status --json",
		Args:    cobra.MaximumNArgs(1),
	}
	return clientVerb(cmd, func(v *verb, args []string) error {
		if len(args) == 1 {
			return v.statusOne(args[0])
		}
		sessions, err := v.allSessions()
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(map[string]any{"sessions": sessions})
		}
		if len(sessions) == 0 {
			fmt.Fprintln(v.out, "no sessions")
			return nil
		}
		t := newTable(v.out)
		for _, s := range sessions {
			t.row(s.ID, gauge(s.PctUsed), numfmt.Thousands(s.Tokens)+" / "+numfmt.Thousands(s.ContextWindow), s.State,
				countsText(s.Messages), fmt.Sprintf("compactions %d", s.Compactions))
		}
		return t.flush()
	})
}

func (v *verb) statusOne(id string) error {
	s, err := v.api.Session(v.ctx, id)
	if err != nil {
		return err
	}
	if v.json {
		return v.printJSON(s)
	}
	t := newTable(v.out)
	t.row("session", s.ID)
	t.row("tokens", numfmt.Thousands(s.Tokens)+" / "+numfmt.Thousands(s.ContextWindow)+" ("+s.Encoding+")")
	t.row("used", gauge(s.PctUsed))
	t.row("state", s.State)
	t.row("messages", countsText(s.Messages))
	t.row("summaries", s.Summaries)
	t.row("compactions", s.Compactions)
	t.row("updated", when(s.UpdatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	if s.FlushPrompt != "" {
		fmt.Fprintln(v.out, "flush prompt:", s.FlushPrompt)
	}
	return nil
}

func countsText(c memory.Counts) string {
	return fmt.Sprintf("active %d, summarized %d, dropped %d, recovered %d", c.Active, c.Summarized, c.Dropped, c.Recovered)
}

// allSessions lists every session the caller may see, all pages.
func (v *verb) allSessions() ([]*memory.Status, error) {
	return collect(v.api.Sessions(v.ctx, listPageSize), 0)
}

func newSessionsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "sessions",
		Short:   "List sessions in a table",
		Example: "  ctxd sessions\n  ctxd sessions --json | jq '.sessions[].id'",
		Args:    cobra.NoArgs,
	}
	return clientVerb(cmd, func(v *verb, _ []string) error {
		sessions, err := v.allSessions()
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(map[string]any{"sessions": sessions})
		}
		t := newTable(v.out, "ID", "TOKENS", "WINDOW", "USED", "STATE", "ACTIVE", "SUMMARIZED", "DROPPED", "RECOVERED", "COMPACTIONS", "UPDATED")
		for _, s := range sessions {
			t.row(s.ID, numfmt.Thousands(s.Tokens), numfmt.Thousands(s.ContextWindow), fmt.Sprintf("%.0f%%", s.PctUsed*100), s.State,
				s.Messages.Active, s.Messages.Summarized, s.Messages.Dropped, s.Messages.Recovered, s.Compactions, when(s.UpdatedAt))
		}
		return t.flush()
	})
}
