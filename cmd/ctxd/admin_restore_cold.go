package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newRestoreColdCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore-cold",
		Short: "Bring cold originals back into the store from the cold mirror when the store lost them (server stopped)",
		Long: "Import into a stopped server's store the cold originals (dropped and summarized messages) of every " +
			"session the store lacks but the cold mirror (cold/<tenant>/<session>.jsonl.gz) still has: after the store " +
			"was lost, the mirror is their last copy. Each comes back as a session of its cold messages, with their " +
			"ids, the server's default settings and vectors from the configured embedder (--embed-url etc., as for " +
			"serve); sessions the store has are left alone. The full-text index is then rebuilt from the store. " +
			"Creates the store when it is missing.",
		Args: cobra.NoArgs,
	}
	return adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, _ []string) error {
		// indexFresh: the index of a lost store describes another store;
		// it is rebuilt from this one below.
		d, err := openDataDir(ctx, cfg, indexFresh, true, newProgress())
		if err != nil {
			return err
		}
		defer d.Close()
		rep, err := d.admin.RestoreCold(ctx)
		if err != nil {
			return fmt.Errorf("restore cold originals into %s: %w", cfg.DataDir, err)
		}
		if err := d.admin.CatchUp(ctx); err != nil {
			return fmt.Errorf("index %s: %w", cfg.DataDir, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "restored %d sessions, %d cold messages from the mirror (%d mirror files of sessions the store has left alone)\n",
			rep.Sessions, rep.Messages, rep.Kept)
		return d.Close()
	})
}
