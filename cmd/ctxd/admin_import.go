package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/ctxd/ctxd/memory/admin"
	"github.com/spf13/cobra"
)

func newImportCmd() *cobra.Command {
	var o admin.ImportOptions
	cmd := &cobra.Command{
		Use:   "import FILE",
		Short: "Restore an export into a data dir (server stopped)",
		Long: "Restore a file written by `ctxd export` into a stopped server's data dir (typically a new one), exactly: " +
			"ids, states, metadata, times, summaries and cold info. A session that exists already stops the import " +
			"before anything is written, unless --replace. The export's vectors are kept when they come from the data " +
			"dir's model; otherwise every message is embedded with the configured embedder (--embed-url etc., as for " +
			"serve). The index and the cold mirror are brought up to date before it returns.",
		Args: cobra.ExactArgs(1),
	}
	cmd.Use = "import FILE (- for stdin)"
	cmd.Flags().BoolVar(&o.Replace, "replace", false, "replace sessions that exist already")
	return adminCmd(cmd, func(ctx context.Context, cmd *cobra.Command, cfg Config, args []string) error {
		f, err := openImport(args[0], cmd.InOrStdin())
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer f.Close()
		d, err := openDataDir(ctx, cfg, indexOpen, true, newProgress())
		if err != nil {
			return err
		}
		defer d.Close()
		stopped := make(chan os.Signal, 1)
		signal.Notify(stopped, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(stopped)
		go func() {
			// A store write is atomic, so stopping here is as safe as a
			// kill -9; what it must not be is silent.
			if sig, ok := <-stopped; ok {
				fmt.Fprintf(cmd.ErrOrStderr(), "ctxd import: stopped by %v part-way: the data dir may hold part of the export, which the server refuses to start on; run `ctxd import %s` again to finish it (no --replace needed)\n", sig, args[0])
				os.Exit(1)
			}
		}()
		rep, err := d.admin.Import(ctx, f, o)
		if err != nil {
			return fmt.Errorf("import %s: %w", args[0], err)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "imported %d sessions, %d messages (%d embedded with %s, %d sessions replaced)\n",
			rep.Sessions, rep.Messages, rep.Reembedded, rep.Model, rep.Replaced)
		return d.Close()
	})
}

func dirOf(path string) string { return filepath.Dir(path) }
