package main

import (
	"fmt"
	"slices"

	"github.com/ctxd/ctxd/api"
	"github.com/ctxd/ctxd/internal/numfmt"
	"github.com/ctxd/ctxd/scoring"
	"github.com/spf13/cobra"
)

func newSearchCmd() *cobra.Command {
	var session, mode string
	var k int
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search stored messages (every session, or one)",
		Example: "  ctxd search 'when does the password rotate' -k 5\n" +
			"  ctxd search password --session demo --mode text",
		Args: cobra.ExactArgs(1),
	}
	cmd.Flags().StringVar(&session, "session", "", "search only this session")
	cmd.Flags().IntVarP(&k, "k", "k", 10, "number of results")
	cmd.Flags().StringVar(&mode, "mode", "hybrid", "hybrid, text (BM25) or vector")
	return clientVerb(cmd, func(v *verb, args []string) error {
		switch mode {
		case "hybrid", "text", "vector":
		default:
			return usageErrorf("--mode %q: want hybrid, text or vector", mode)
		}
		results, err := v.api.Search(v.ctx, api.SearchIn{Query: args[0], K: k, Mode: mode, SessionID: session})
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(api.SearchOut{Results: results})
		}
		if len(results) == 0 {
			fmt.Fprintln(v.out, "no results")
			return nil
		}
		t := newTable(v.out, "SCORE", "SESSION", "ID", "ROLE", "STATE", "CONTENT")
		for _, r := range results {
			t.row(score(r.Score), r.SessionID, r.ID, r.Role, r.State, matchSnippet(r, 70))
		}
		return t.flush()
	})
}

func newContextCmd() *cobra.Command {
	var maxTokens int
	var explain, dryRun bool
	cmd := &cobra.Command{
		Use:   "context SESSION PROMPT",
		Short: "Show the window ctxd would hand out for the next prompt (changes the session; --dry-run does not)",
		Long: "Build the working window for PROMPT, as an agent would get it, and print each message's source, " +
			"score, role and tokens, then the budget. This CHANGES the session as an agent's call does: cold messages " +
			"relevant to PROMPT are recovered into the working window, and a session past its hard limit is compacted " +
			"first. With --dry-run nothing changes: the window is the one the call would build (the dashboard's preview).",
		Example: "  ctxd context demo 'rotate the staging password now?' --max-tokens 2000 --explain\n" +
			"  ctxd context demo 'what did we decide?' --dry-run",
		Args: cobra.ExactArgs(2),
	}
	cmd.Flags().IntVar(&maxTokens, "max-tokens", 0, "token budget of the window (default: the session's window minus its reserve)")
	cmd.Flags().BoolVar(&explain, "explain", false, "show each message's score components")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "build the window without changing the session (no recovery, no compaction)")
	return clientVerb(cmd, func(v *verb, args []string) error {
		if maxTokens < 0 {
			return usageErrorf("--max-tokens %d: want a positive number, or 0 for the session's default", maxTokens)
		}
		req := api.ContextIn{Prompt: args[1], Explain: explain, DryRun: dryRun}
		if maxTokens > 0 {
			req.MaxTokens = &maxTokens
		}
		win, err := v.api.Context(v.ctx, args[0], req)
		if err != nil {
			return err
		}
		if v.json {
			return v.printJSON(win)
		}
		return printWindow(v, win, explain, dryRun)
	})
}

func printWindow(v *verb, win *api.Context, explain, dryRun bool) error {
	header := []string{"SOURCE", "SCORE", "ROLE", "TOKENS", "ID", "CONTENT"}
	if explain {
		header = []string{"SOURCE", "SCORE", "SIM", "REC", "REF", "IMP", "ROLE", "TOKENS", "ID", "CONTENT"}
	}
	t := newTable(v.out, header...)
	for _, m := range win.Messages {
		role := string(m.Role)
		if m.Kind != "" {
			role += "/" + m.Kind
		}
		cells := []any{m.Source, score(m.Score)}
		if explain {
			c := m.Components
			if c == nil {
				c = &scoring.Components{}
			}
			cells = append(cells, score(c.Similarity), score(c.Recency), score(c.References), score(c.Importance))
		}
		cells = append(cells, role, m.Tokens, m.ID, snippet(shown(m.Message), 60))
		t.row(cells...)
	}
	if err := t.flush(); err != nil {
		return err
	}
	b := win.Budget
	fmt.Fprintf(v.out, "\nbudget: %s of %s tokens used (prompt %s); %d messages", numfmt.Thousands(b.Used), numfmt.Thousands(b.MaxTokens),
		numfmt.Thousands(b.PromptTokens), len(win.Messages))
	switch {
	case len(win.Recovered) > 0 && dryRun:
		fmt.Fprintf(v.out, "; dry run: %d would be recovered from cold storage for this prompt", len(win.Recovered))
	case len(win.Recovered) > 0:
		fmt.Fprintf(v.out, "; %d recovered from cold storage for this prompt", len(win.Recovered))
	}
	if win.WouldCompact {
		fmt.Fprint(v.out, "; dry run: the session is past its hard limit, a real call would compact it first")
	}
	fmt.Fprintln(v.out)
	if explain && len(b.Levels) > 0 {
		t := newTable(v.out, "LEVEL", "TOKENS")
		for _, name := range sortedKeys(b.Levels) {
			t.row(name, numfmt.Thousands(b.Levels[name]))
		}
		return t.flush()
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
