package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/ctxd/ctxd/memory/admin"
	"github.com/spf13/cobra"
)

func newVerifyCmd() *cobra.Command {
	var repair, asJSON bool
	cmd := &cobra.Command{
		Use:   "verify [--repair] [--json]",
		Short: "Compare the store with the index, the vectors and the cold mirror (server stopped)",
		Long: "Compare a stopped server's store, the truth, with the full-text index (missing, extra and stale " +
			"documents), the vectors (missing, wrong length) and the cold mirror files (missing, stale, torn or " +
			"unreadable lines), and checks the store itself (its file's structure, each record's checksum). Prints one " +
			"line per inconsistency and a summary; exits 0 when consistent and 1 when inconsistencies remain. " +
			"Without --repair it only reads. --repair fixes what it can from the store, then verifies again.",
		Args: cobra.NoArgs,
	}
	cmd.Flags().BoolVar(&repair, "repair", false, "fix what can be fixed from the store, then verify again")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, _ []string) error {
		// Without --repair nothing is opened for writing: verify must
		// leave the data dir as it found it, damage included.
		use := indexRead
		if repair {
			use = indexOpen
		}
		d, err := openDataDir(ctx, cfg, use, false, newProgress())
		if err != nil {
			return err
		}
		defer d.Close()
		out := cmd.OutOrStdout()
		rep, err := d.admin.Verify(ctx)
		if err != nil {
			return fmt.Errorf("verify %s: %w", cfg.DataDir, err)
		}
		result := verifyResult{Before: rep, After: rep}
		if repair && !rep.Consistent() {
			if !asJSON {
				printReport(out, rep)
				fmt.Fprintln(out, "repairing...")
			}
			if err := d.admin.Repair(ctx, rep); err != nil {
				return fmt.Errorf("repair %s: %w", cfg.DataDir, err)
			}
			result.Repaired = true
			if result.After, err = d.admin.Verify(ctx); err != nil {
				return fmt.Errorf("verify %s after repair: %w", cfg.DataDir, err)
			}
		}
		if asJSON {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			if err := enc.Encode(result); err != nil {
				return err
			}
		} else {
			printReport(out, result.After)
		}
		if err := d.Close(); err != nil {
			return err
		}
		if n := len(result.After.Findings); n > 0 {
			return fmt.Errorf("%d inconsistencies remain", n)
		}
		return nil
	})
}

// verifyResult is verify's JSON: what was found, and after a repair what remains.
type verifyResult struct {
	Before   *admin.VerifyReport `json:"before"`
	Repaired bool                `json:"repaired"`
	After    *admin.VerifyReport `json:"after"`
}

func printReport(w io.Writer, rep *admin.VerifyReport) {
	for _, f := range rep.Findings {
		fmt.Fprintln(w, f.String())
	}
	fmt.Fprintf(w, "checked %d sessions, %d messages, %d index documents, %d vectors, %d cold files: ",
		rep.Sessions, rep.Messages, rep.IndexDocs, rep.Vectors, rep.ColdFiles)
	if rep.Consistent() {
		fmt.Fprintln(w, "consistent")
		return
	}
	counts := rep.Counts()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	fmt.Fprintf(w, "%d inconsistencies (%s)\n", len(rep.Findings), strings.Join(parts, ", "))
}
