package main

import (
	"context"
	"os"

	"github.com/ctxd/ctxd/internal/server"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// addAdminCommands adds the offline verbs that work on a stopped server's data dir.
func addAdminCommands(root *cobra.Command) {
	root.AddCommand(newReindexCmd(), newExportCmd(), newImportCmd(), newVerifyCmd(), newRestoreColdCmd(), newMigrateCmd())
}

// adminFlags are the serve flags an admin verb uses: where the data dir is,
// how to log, and the embedder (to embed messages that lack a vector). The
// other serve flags are accepted (one config file serves both) but hidden.
var adminFlags = map[string]bool{
	"data-dir": true, "store": true, "log-level": true, "log-format": true, "config": true,
	"embed-url": true, "embed-model": true, "embed-dim": true, "embed-batch": true, "embed-timeout": true,
}

// adminCmd builds an admin verb: run gets the layered config (flags, then
// CTXD_ variables, then --config), validated.
func adminCmd(cmd *cobra.Command, run func(ctx context.Context, cmd *cobra.Command, cfg Config, args []string) error) *cobra.Command {
	var cfg Config
	var configPath string
	fs := cmd.Flags()
	server.BindFlags(fs, &cfg)
	fs.StringVar(&configPath, "config", os.Getenv("CTXD_CONFIG"), "YAML config file (the server's)")
	// Admin verbs report; info logs would drown that and the progress bar.
	fs.Lookup("log-level").DefValue = "warn"
	_ = fs.Set("log-level", "warn")
	fs.Lookup("log-level").Changed = false
	fs.VisitAll(func(f *pflag.Flag) {
		if !adminFlags[f.Name] && fs.Lookup(f.Name) != nil {
			f.Hidden = true
		}
	})
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if err := server.ApplyLayers(cmd.Flags(), configPath, os.Getenv); err != nil {
			return err
		}
		if err := cfg.Validate(); err != nil {
			return err
		}
		return run(cmd.Context(), cmd, cfg, args)
	}
	return cmd
}
