package main

import (
	"fmt"
	"strings"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/numfmt"
	"github.com/ctxd/ctxd/memory"
	"github.com/spf13/cobra"
)

func newCompactCmd() *cobra.Command {
	var now, dryRun bool
	var prompt string
	cmd := &cobra.Command{
		Use:   "compact SESSION --now",
		Short: "Compact a session now and print the report",
		Long: "Compact a session now. Compaction normally runs on its own when a write carries a session " +
			"past its trigger; this verb forces one, so it asks for --now. --dry-run reports what would happen " +
			"(every message's score and fate) without changing anything.",
		Example: "  ctxd compact demo --now --dry-run --prompt 'deploy the staging database'",
		Args:    cobra.ExactArgs(1),
	}
	cmd.Flags().BoolVar(&now, "now", false, "really compact now (compaction is normally automatic)")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "report what would happen, change nothing")
	cmd.Flags().StringVar(&prompt, "prompt", "", "what the agent works on now: relevance is scored against it (default: the last user message)")
	return clientVerb(cmd, func(v *verb, args []string) error {
		if !now {
			return usageErrorf("compaction runs automatically when a session passes its trigger; to compact %s now anyway, add --now", args[0])
		}
		rep, err := v.api.Compact(v.ctx, args[0], api.CompactIn{Prompt: prompt, DryRun: dryRun})
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(rep)
		}
		return printCompaction(v, args[0], rep)
	})
}

func printCompaction(v *verb, session string, rep *memory.CompactionReport) error {
	head := fmt.Sprintf("compacted %s (trigger %s)", session, rep.Trigger)
	if rep.DryRun {
		head = fmt.Sprintf("dry run: compaction of %s would do this (nothing changed)", session)
	}
	fmt.Fprintln(v.out, head)
	t := newTable(v.out)
	t.row("tokens", fmt.Sprintf("%s -> %s (target %s)", numfmt.Thousands(rep.TokensBefore), numfmt.Thousands(rep.TokensAfter), numfmt.Thousands(rep.Target)))
	t.row("dropped", len(rep.Dropped))
	t.row("summarized", fmt.Sprintf("%d into %d summaries", len(rep.Summarized), len(rep.Summaries)))
	t.row("pruned", len(rep.Pruned))
	if rep.SummaryMethod != "" {
		t.row("summary method", rep.SummaryMethod)
	}
	t.row("took", fmt.Sprintf("%.0f ms", rep.TookMS))
	if err := t.flush(); err != nil {
		return err
	}
	if rep.ProtectedOnly {
		fmt.Fprintln(v.out, "only protected messages are left: the window stays above the target")
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(v.out, "note:", n)
	}
	if rep.Error != "" {
		fmt.Fprintln(v.out, "error:", rep.Error)
	}
	if len(rep.Scores) == 0 {
		return nil
	}
	fmt.Fprintln(v.out)
	t = newTable(v.out, "ID", "DECISION", "REASON", "SCORE", "TOKENS")
	for _, s := range rep.Scores {
		t.row(s.ID, s.Decision, dash(s.Reason), score(s.Score), s.Tokens)
	}
	return t.flush()
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

func newColdCmd() *cobra.Command {
	cold := &cobra.Command{
		Use:   "cold",
		Short: "Inspect cold storage (dropped and summarized originals)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return usageErrorf("say what to do with cold storage: ctxd cold list --session S")
		},
	}
	var session string
	var limit int
	var oldest bool
	list := &cobra.Command{
		Use:     "list --session S",
		Short:   "List a session's cold chunks",
		Example: "  ctxd cold list --session demo --limit 20",
		Args:    cobra.NoArgs,
	}
	list.Flags().StringVar(&session, "session", "", "the session (required)")
	list.Flags().IntVar(&limit, "limit", 100, "at most this many chunks, newest first (0: all)")
	list.Flags().BoolVar(&oldest, "oldest", false, "list the oldest first")
	cold.AddCommand(clientVerb(list, func(v *verb, _ []string) error {
		if session == "" {
			return usageErrorf("cold list needs --session S")
		}
		if limit < 0 {
			return usageErrorf("--limit %d: want 0 (all) or more", limit)
		}
		order := memory.OrderNewest
		if oldest {
			order = memory.OrderOldest
		}
		chunks, err := collect(v.api.Cold(v.ctx, session, pageSize(limit), order), limit)
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(map[string]any{"chunks": chunks})
		}
		if len(chunks) == 0 {
			fmt.Fprintf(v.out, "session %s has nothing in cold storage\n", session)
			return nil
		}
		t := newTable(v.out, "ID", "STATE", "REASON", "SCORE", "TOKENS", "DROPPED", "RECOVERABLE UNTIL", "ROLE", "CONTENT")
		for _, c := range chunks {
			t.row(c.ID, c.State, dash(c.DropReason), score(c.RelevanceScore), c.Tokens, when(c.DroppedAt),
				when(c.RecoverableUntil), c.Role, snippet(shown(c.Message), 60))
		}
		return t.flush()
	}))
	return cold
}

func newRecoverCmd() *cobra.Command {
	var chunk, session string
	cmd := &cobra.Command{
		Use:   "recover --chunk ID [--session S]",
		Short: "Put a dropped or summarized message back into the working window",
		Long: "Recover a cold message into its session's working window. Without --session the message is " +
			"looked up first to find its session. Recovering twice is not an error.",
		Example: "  ctxd recover --chunk 01J9Z4Q6W8X2 --session demo",
		Args:    cobra.NoArgs,
	}
	cmd.Flags().StringVar(&chunk, "chunk", "", "id of the message to recover (required)")
	cmd.Flags().StringVar(&session, "session", "", "its session (looked up when not given)")
	return clientVerb(cmd, func(v *verb, _ []string) error {
		if chunk == "" {
			return usageErrorf("recover needs --chunk ID (ids are in ctxd cold list and ctxd drops)")
		}
		if session == "" {
			m, err := v.api.Message(v.ctx, chunk)
			if err != nil {
				return err
			}
			session = m.SessionID
		}
		m, err := v.api.Recover(v.ctx, session, chunk)
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(m)
		}
		fmt.Fprintf(v.out, "recovered %s into session %s: %s message, %d tokens, now %s\n", m.ID, session, m.Role, m.Tokens, m.State)
		fmt.Fprintf(v.out, "  %s\n", snippet(m.Content, 100))
		return nil
	})
}
