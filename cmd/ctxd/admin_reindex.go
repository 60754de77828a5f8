package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
)

func newReindexCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reindex",
		Short: "Rebuild the full-text index from the store and embed messages that lack a vector (server stopped)",
		Long: "Rebuild the full-text (Bleve) index of a stopped server's data dir from the store, the truth, and give every " +
			"message a vector of the data dir's model (messages without one, or with one of the wrong length, are " +
			"embedded with the configured embedder: --embed-url etc., as for serve).",
		Args: cobra.NoArgs,
	}
	return adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, _ []string) error {
		d, err := openDataDir(ctx, cfg, indexFresh, false, newProgress())
		if err != nil {
			return err
		}
		defer d.Close()
		rep, err := d.admin.Reindex(ctx)
		if err != nil {
			return fmt.Errorf("reindex %s: %w", cfg.DataDir, err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "reindexed %d messages (%d embedded, %d vector records rewritten)\n",
			rep.IndexedDocs, rep.Reembedded, rep.Rerecorded)
		return d.Close()
	})
}
