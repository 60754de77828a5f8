package main

import (
	"context"
	"fmt"

	"github.com/ctxd/ctxd/internal/server"
	"github.com/ctxd/ctxd/memory/pgstore"
	"github.com/spf13/cobra"
)

func newMigrateCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate --store postgres://...",
		Short: "Bring a PostgreSQL store's schema to this binary's version, and nothing else",
		Long: "Apply the schema migrations a PostgreSQL store (--store, CTXD_STORE) lacks, each in a transaction, and " +
			"report the schema's version. `ctxd serve` applies them at start too; run this first to upgrade the schema " +
			"before rolling new nodes out. A schema newer than this binary's is refused, by this and by serve.",
		Args: cobra.NoArgs,
	}
	return adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, _ []string) error {
		if !server.SharedStore(cfg.Store) {
			return fmt.Errorf("--store: give the postgres:// URL of the store to migrate (the embedded store needs no migration)")
		}
		st, err := pgstore.Open(ctx, cfg.Store, pgstore.Options{NoMigrate: true})
		if err == nil {
			fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d: nothing to apply\n", pgstore.SchemaVersion())
			return st.Close()
		}
		st, err = pgstore.Open(ctx, cfg.Store, pgstore.Options{})
		if err != nil {
			return err
		}
		defer st.Close()
		fmt.Fprintf(cmd.OutOrStdout(), "schema at version %d\n", pgstore.SchemaVersion())
		return nil
	})
}
